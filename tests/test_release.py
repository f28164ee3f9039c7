"""``hitkit release``: a folder others can load, with a card, pseudonymous, and without personal data.

The end-to-end test runs a simulated arena study (worker prompts, bot replies, reasons and feedback: every
kind of free text a worker types), plants e-mails, phone numbers, names, street addresses and card numbers in
what the workers wrote, releases the study and then looks at the folder as an outsider would: every id the
database holds, grepped for; the planted data, counted; the other words, compared; the data loaded with
``datasets`` and with ``hitkit.load``; and the analysis of the release compared with the study's own.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from hitkit.cli import main
from hitkit.db.models import Assignment, Conversation, Hit, Response, Study, Turn, Worker
from hitkit.db.session import session_scope
from hitkit.errors import InputError
from hitkit.release import scrub
from hitkit.release.pseudonyms import pseudonym_map
from tests.studies import launch
from tests.test_arena_study import arena_study, bot_server  # noqa: F401 (the module's bot server fixture)

# --- the pieces --------------------------------------------------------------------------------------------


def test_pseudonyms_keep_the_ids_order_and_change_with_the_salt_but_not_within_a_release():
    ids = ["zeta-9", "alpha-1", "mid-5", "alpha-1"]
    first = pseudonym_map(ids, "worker", b"secret", "salt-1")
    again = pseudonym_map(reversed(ids), "worker", b"secret", "salt-1")
    other = pseudonym_map(ids, "worker", b"secret", "salt-2")
    assert first == again and len(first) == 3
    assert sorted(first, key=first.get) == sorted(first)  # the pseudonyms sort as the ids do
    assert all(p.startswith("w") and "alpha" not in p for p in first.values())
    assert first["alpha-1"] != other["alpha-1"]
    assert pseudonym_map(ids, "worker", b"another key", "salt-1")["alpha-1"] != first["alpha-1"]


def test_own_patterns_find_street_addresses_card_like_numbers_and_introduced_names():
    text = "I'm Sorry but my name is Ana Souza, I live at 42 Elm Street and my card is 1234 5678 9012 3456."
    found = {(text[s:e], kind) for s, e, kind, _ in scrub.own_spans(text)}
    assert ("Ana Souza", "PERSON") in found
    assert ("42 Elm Street", "STREET_ADDRESS") in found
    assert ("1234 5678 9012 3456", "CREDIT_CARD") in found
    assert not any(t.startswith("Sorry") for t, _ in found)


def test_overlapping_spans_merge_into_one_placeholder():
    merged = scrub.merge([(0, 10, "PERSON", 0.8), (5, 20, "EMAIL_ADDRESS", 1.0), (30, 35, "DATE_TIME", 0.9)])
    assert merged == [(0, 20, "EMAIL_ADDRESS", 1.0)]
    span = scrub.Span("t", "0", "f", 0, 20, "EMAIL_ADDRESS", "x", 1.0)
    assert scrub.replace_spans("a.person@example.org wrote", [span]) == "[EMAIL] wrote"


def test_a_reviewed_span_file_that_no_longer_matches_its_text_is_refused_with_its_line(tmp_path):
    texts = {("feedback", "0", "feedback"): "write to bo@example.org"}
    path = tmp_path / "spans.csv"
    path.write_text(
        "source,key,field,start,end,entity,text,score,action\nfeedback,0,feedback,9,23,EMAIL_ADDRESS,bo@example.com,1,replace\n"
    )
    with pytest.raises(InputError, match="line 2: characters 9–23 of feedback 0 do not read"):
        scrub.read_spans(path, texts)
    path.write_text(
        "source,key,field,start,end,entity,text,score,action\nfeedback,0,feedback,9,23,EMAIL_ADDRESS,bo@example.org,1,maybe\n"
    )
    with pytest.raises(InputError, match="action must be replace or keep"):
        scrub.read_spans(path, texts)


# --- a whole study -----------------------------------------------------------------------------------------

PLANTED = [
    ("email", "you can write to {first}.{last}@example-mail.com"),
    ("phone", "my number is +1 415 555 01{n:02d}"),
    ("name", "my name is {First} {Last}"),
    ("address", "I live at {house} {Street} Street"),
    ("card", "my card number is 4111 1111 1111 1111"),
    ("phone", "call me on (212) 555-01{n:02d}"),
    ("email", "or {first}{n}@mailbox.org"),
    ("address", "send it to {house} {Street} Avenue"),
]
FIRST = ["Maria", "James", "Priya", "Ahmed", "Laura", "Kenji", "Olga", "Daniel", "Fatima", "Lucas"]
LAST = ["Garcia", "Smith", "Patel", "Hassan", "Müller", "Tanaka", "Ivanova", "Brown", "Khan", "Silva"]
STREETS = ["Maple", "Baker", "Harbor", "Willow", "Cedar", "Lincoln", "Oak", "Station"]


def plant(n: int) -> tuple[str, str]:
    """The n-th planted piece of personal data: (the sentence with it, the personal value itself)."""
    kind, template = PLANTED[n % len(PLANTED)]
    first, last = FIRST[n % len(FIRST)], LAST[(n * 3) % len(LAST)]
    values = {
        "first": first.lower(),
        "last": last.lower().replace("ü", "u"),
        "First": first,
        "Last": last,
        "n": n % 100,
        "house": 10 + n,
        "Street": STREETS[n % len(STREETS)],
    }
    sentence = template.format(**values)
    value = re.split(r" (?:to|is|at|on|or) ", sentence, maxsplit=1)[-1]
    if kind == "name":
        value = f"{first} {last}"
    return sentence, value


def words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.lower())


@pytest.fixture(scope="module")
def released_study(tmp_path_factory, bot_server):  # noqa: F811 - the fixture imported above
    """An arena study run by the simulated crowd, personal data planted in what its workers wrote, released."""
    from hitkit.db.migrate import upgrade

    tmp = tmp_path_factory.mktemp("release")
    db = f"sqlite:///{tmp / 'hitkit.db'}"  # one store for the module: what is checked is the release, not storage
    upgrade(db)
    study = arena_study(tmp, db, bot_server, hits=6)
    launch(study, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400)
    planted: list[tuple[str, str, str]] = []  # (where, sentence, value)
    n = 0
    with session_scope(db) as s:
        turns = s.scalars(
            select(Turn)
            .join(Conversation, Turn.conversation_id == Conversation.id)
            .where(Conversation.kind == "human_bot", Turn.speaker == "worker")
            .order_by(Turn.id)
        ).all()
        for turn in turns:
            sentence, value = plant(n)
            turn.text = f"{turn.text} By the way, {sentence}."
            planted.append(("turn", sentence, value))
            n += 1
        for r in s.scalars(select(Response).where(Response.question == "reason").order_by(Response.id)).all():
            sentence, value = plant(n)
            r.value = f"A was clearer; {sentence}."
            planted.append(("reason", sentence, value))
            n += 1
        for a in s.scalars(
            select(Assignment).where(Assignment.confirmed_at.is_not(None)).order_by(Assignment.id)
        ).all():
            sentence, value = plant(n)
            a.feedback = f"Fine task. {sentence}, if anything was unclear."
            planted.append(("feedback", sentence, value))
            n += 1
        ids = {w.external_id for w in s.scalars(select(Worker))}
        ids |= {a.provider_assignment_id for a in s.scalars(select(Assignment)) if a.provider_assignment_id}
        ids |= {h.provider_hit_id for h in s.scalars(select(Hit)) if h.provider_hit_id}
    out = tmp / "release"
    result = CliRunner().invoke(main, ["release", str(study), "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"study": study, "db": db, "out": out, "planted": planted, "ids": ids, "tmp": tmp}


def folder_text(out: Path) -> str:
    """Everything in the release as text: the Parquet tables as CSV, the other files as they are."""
    parts = []
    for path in sorted(out.rglob("*")):
        if path.suffix == ".parquet":
            parts.append(pd.read_parquet(path).to_csv(index=False))
        elif path.is_file():
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


@pytest.mark.slow
def test_a_release_holds_no_platform_id_and_no_personal_data_planted_in_what_workers_wrote(released_study):
    out, text = released_study["out"], folder_text(released_study["out"])
    leaked_ids = sorted(i for i in released_study["ids"] if i and i in text)
    assert leaked_ids == []
    planted = released_study["planted"]
    assert len(planted) >= 60 and {w for w, _, _ in planted} == {"turn", "reason", "feedback"}
    missed = [value for _, _, value in planted if value in text]
    assert len(missed) / len(planted) <= 0.05, missed
    manifest = json.loads((out / "release.json").read_text())
    assert sum(manifest["personal_data"]["replaced"].values()) >= 0.95 * len(planted)
    assert "payments" in manifest["removed"]["tables"] and not (out / "payments").exists()
    assert manifest["pseudonyms"]["kinds"]["worker"] == pd.read_parquet(out / "assignments").worker_id.nunique()


@pytest.mark.slow
def test_a_release_changes_almost_no_word_that_was_not_personal(released_study):
    """Words outside the planted data: at most 2 % changed, over every scrubbed field."""
    out = released_study["out"]
    planted_words = Counter(w for _, sentence, _ in released_study["planted"] for w in words(sentence))
    released = folder_text(out)
    with session_scope(released_study["db"]) as s:
        originals = [t.text for t in s.scalars(select(Turn).join(Conversation).where(Conversation.kind == "human_bot"))]
        originals += [r.value for r in s.scalars(select(Response).where(Response.question == "reason"))]
        originals += [a.feedback for a in s.scalars(select(Assignment)) if a.feedback]
    before = Counter(w for text in originals for w in words(text)) - planted_words
    after = Counter(words(released))
    changed = sum((before - after).values())
    assert changed / sum(before.values()) <= 0.02, (before - after).most_common(20)


@pytest.mark.slow
def test_a_release_loads_with_datasets_and_hitkit_and_its_analysis_reproduces_the_study(released_study):
    import datasets

    out, tmp = released_study["out"], released_study["tmp"]
    battles = pd.read_parquet(out / "battles" / "battles.parquet")
    assert len(datasets.load_dataset(str(out), "battles", split="train")) == len(battles)
    assert len(datasets.load_dataset("parquet", data_dir=str(out / "workers"), split="train")) > 0
    card = (out / "README.md").read_text()
    for config in ("battles", "assignments", "conversations", "workers", "systems"):
        assert f"config_name: {config}" in card
    for section in ("## Description", "## Collection process", "## Analysis", "## Licence", "## Citation"):
        assert section in card
    import hitkit

    data = hitkit.load(out)
    assert len(data.tables["battles"]) == len(battles) and data.task == "arena"
    runner = CliRunner()
    study_dir = tmp / "runs" / "arena-demo"
    for source, dest in ((study_dir / "export", tmp / "a-study"), (out, tmp / "a-release")):
        result = runner.invoke(main, ["analyze", "arena", str(source), "--out", str(dest), "--no-progress"])
        assert result.exit_code == 0, result.output
    board = [pd.read_csv(tmp / d / "leaderboard.csv") for d in ("a-study", "a-release")]
    pd.testing.assert_frame_equal(board[0], board[1])
    summaries = [json.loads((tmp / d / "summary.json").read_text()) for d in ("a-study", "a-release")]
    figures = [{k: v for k, v in s.items() if isinstance(v, (int, float))} for s in summaries]
    assert figures[0] == figures[1] and len(figures[0]) > 3


@pytest.mark.slow
def test_review_spans_then_release_what_the_coordinator_kept_and_left_out(released_study):
    study, tmp = released_study["study"], released_study["tmp"]
    review = tmp / "spans.csv"
    runner = CliRunner()
    result = runner.invoke(main, ["release", str(study), "--out", str(tmp / "r2"), "--review", str(review)])
    assert result.exit_code == 0, result.output
    assert not (tmp / "r2").exists() and "span(s) of personal data to check" in result.output
    spans = pd.read_csv(review, keep_default_na=False)
    battles = pd.read_csv(tmp / "runs" / "arena-demo" / "export" / "battles.csv", dtype=str)
    worker = battles["worker_id"].iloc[-1]  # withdraws; a reason of another worker is kept as written
    others = {str(i) for i in battles.index[battles["worker_id"] != worker]}
    kept = spans.index[(spans["source"] == "battles") & spans["key"].astype(str).isin(others)][0]
    spans.loc[kept, "action"] = "keep"
    spans.to_csv(review, index=False)
    args = ["release", str(study), "--out", str(tmp / "r2"), "--spans", str(review), "--exclude-worker", worker]
    result = runner.invoke(main, [*args, "--drop-field", "feedback.feedback", "--times", "day"])
    assert result.exit_code == 0, result.output
    text = folder_text(tmp / "r2")
    assert spans.loc[kept, "text"] in text
    manifest = json.loads((tmp / "r2" / "release.json").read_text())
    assert manifest["personal_data"]["reviewed"] and manifest["personal_data"]["kept_after_review"] == 1
    assert manifest["excluded"]["workers_withdrawn"] == 1 and manifest["removed"]["fields"] == ["feedback.feedback"]
    assert "feedback" not in pd.read_parquet(tmp / "r2" / "feedback").columns
    assert len(pd.read_parquet(tmp / "r2" / "assignments")) < len(
        pd.read_parquet(released_study["out"] / "assignments")
    )
    first = pd.read_parquet(released_study["out"] / "assignments").worker_id
    assert not set(first) & set(pd.read_parquet(tmp / "r2" / "assignments").worker_id)  # new pseudonyms


@pytest.mark.slow
def test_a_running_study_is_released_only_with_partial(released_study):
    study, tmp = released_study["study"], released_study["tmp"]
    with session_scope(released_study["db"]) as s:
        s.scalars(select(Study)).one().status = "running"
    runner = CliRunner()
    try:
        result = runner.invoke(main, ["release", str(study), "--out", str(tmp / "r3")])
        assert result.exit_code != 0 and "is running; a release is made from a finished study" in result.output
        assert not (tmp / "r3").exists()
        result = runner.invoke(main, ["release", str(study), "--out", str(tmp / "r3"), "--partial"])
        assert result.exit_code == 0, result.output
        assert (
            json.loads((tmp / "r3" / "release.json").read_text())["partial"] == "released while the study was running"
        )
    finally:
        with session_scope(released_study["db"]) as s:
            s.scalars(select(Study)).one().status = "completed"


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["pairwise", "live_chat", "spot_the_bot"])
def test_the_analysis_of_a_release_gives_the_studys_own_figures(tmp_path, protocol):
    """The frozen golden runs: released, then analysed, give the summary's figures and the ranking unchanged."""
    import shutil

    from tests.data.golden.make_golden import HERE

    database = tmp_path / "hitkit.db"
    shutil.copy(HERE / protocol / "hitkit.db", database)
    for path in (HERE / protocol).iterdir():
        if path.suffix in (".yaml", ".jsonl"):
            shutil.copy(path, tmp_path / path.name)
    study = tmp_path / "study.yaml"
    env = {"HITKIT_DATABASE_URL": f"sqlite:///{database}", "HITKIT_SECRET": "k3Yq9vZ2mR7tW4xB8nC1pL6sD0fG5hJ" * 2}
    runner = CliRunner(env=env)
    for args in (
        ["db", "upgrade", "--db", env["HITKIT_DATABASE_URL"]],
        ["export", str(study), "--out", str(tmp_path / "export"), "--no-progress"],
        ["release", str(study), "--out", str(tmp_path / "release")],
        ["analyze", protocol, str(tmp_path / "export"), "--out", str(tmp_path / "a1"), "--study", str(study)],
        ["analyze", protocol, str(tmp_path / "release"), "--out", str(tmp_path / "a2"), "--study", str(study)],
    ):
        result = runner.invoke(main, [*args, "--no-progress"] if args[0] == "analyze" else args)
        assert result.exit_code == 0, result.output
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("a1", "a2")]
    figures = [
        {k: v for k, v in s.items() if isinstance(v, (int, float, list)) and k != "exclusions"} for s in summaries
    ]
    assert figures[0] == figures[1]
    ranking = "systems.csv" if (tmp_path / "a1" / "systems.csv").is_file() else "ranking.csv"
    assert (tmp_path / "a1" / ranking).read_text() == (tmp_path / "a2" / ranking).read_text()
    text = folder_text(tmp_path / "release")
    export = pd.read_csv(tmp_path / "export" / "assignments.csv", dtype=str)
    assert not [w for w in export["worker_id"] if w in text]
