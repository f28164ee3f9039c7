"""A whole Spot The Bot study with the simulated crowd over real HTTP, on SQLite and PostgreSQL:
bot–bot material (a fixture in GenerationConfig's format) plus human–human dialogues → segments →
HITs → labels → ``annotations.csv`` → the analysis, with the packing constraints re-checked on the
database."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pandas as pd
import pytest
import yaml
from sqlalchemy import select

from hitkit.db.models import Assignment, Conversation, Hit, Response, Study, Unit, Worker, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, FlowError
from hitkit.protocols import task_for
from hitkit.protocols.spot_the_bot.reading import read_annotations
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study, parse_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.tables.schema import ACTIVE_STATUSES, DONE_STATUSES
from hitkit.worker.admission import enter, open_hits
from hitkit.worker.flow import return_assignment
from tests.studies import launch

QUALITY = {"alpha": 0.9, "beta": 0.6, "gamma": 0.2}
LENGTHS = [2, 3, 5]


def write_bot_bot(path, per_pair: int = 2, exchanges: int = 5) -> int:
    """Bot–bot conversations of every pair (self-chat included), as the generator writes them."""
    names = sorted(QUALITY)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i:]]
    lines = []
    for a, b in pairs:
        for n in range(per_pair):
            turns = [
                {
                    "speaker": t % 2,
                    "system": (a, b)[t % 2],
                    "text": f"{(a, b)[t % 2]} <b>says</b> line {t} of {a}-{b} #{n}",
                }
                for t in range(2 * exchanges)
            ]
            lines.append(
                json.dumps({"id": f"{a}-{b}-{n}", "systems": [a, b], "seed_dialogue": f"seed-{n}", "turns": turns})
            )
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def write_human_human(path, count: int = 4, turns: int = 12) -> None:
    rows = [
        {"id": f"d{i}", "turns": [f"person {t % 2} in dialogue {i}, turn {t}" for t in range(turns)]}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def stb_study(tmp_path, database_url, *, human_file: bool = True, **section) -> str:
    write_bot_bot(tmp_path / "bot_bot.jsonl")
    spot = {
        "bot_conversations": "bot_bot.jsonl",
        "segment_lengths": LENGTHS,
        "segments_per_hit": 8,
        "annotations_per_segment": 2,
        "human_count": 3,
        **section,
    }
    if human_file:
        write_human_human(tmp_path / "human.jsonl")
        spot["human_conversations"] = "human.jsonl"
    data = {
        "study": "stb-demo",
        "task": "spot_the_bot",
        "seed": 3,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": database_url,
        "systems": [{"name": n} for n in QUALITY],
        "spot_the_bot": spot,
        "hit": {"title": "Is it a person or a bot?", "reward": "1.00"},
        "schedule": {"per_worker_cap": 3, "interval_s": 0.3, "wave_size": 10, "max_concurrent": 10},
        "simulated": {
            "workers": [
                {"profile": "diligent", "count": 7},
                {"profile": "noisy", "count": 2},
                {"profile": "spammer", "count": 2},
            ],
            "quality": QUALITY,
            "concurrency": 6,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_simulated_spot_the_bot_study_keeps_every_constraint_and_exports_the_analysis_input(tmp_path, database_url):
    # Human–human material from the default corpus (chatterbot-corpus) in this run.
    study_file = stb_study(tmp_path, database_url, human_file=False)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "stb-demo"

    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        kinds = Counter(s.scalars(select(Conversation.kind)))
        assert kinds == {"bot_bot": 12, "human_human": 3}
        units = {u.id: u for u in s.scalars(select(Unit))}
        assert len(units) == 15 * len(LENGTHS)
        hits = s.scalars(select(Hit)).all()
        hit_units = {h.id: [hu.unit for hu in h.units] for h in hits}
        # Packing on the database: no conversation twice in a HIT, every length and both kinds in
        # each HIT, every segment in exactly one HIT.
        for h in hits:
            convs = [u.conversation_id for u in hit_units[h.id]]
            assert len(convs) == len(set(convs)) and len(convs) <= 8
            assert {u.payload["k"] for u in hit_units[h.id]} == set(LENGTHS)
            assert {u.payload["kind"] for u in hit_units[h.id]} == {"bot_bot", "human_human"}
            assert h.max_assignments == 2
        assert Counter(u.id for us in hit_units.values() for u in us) == Counter(list(units))
        assignments = s.scalars(select(Assignment)).all()
        shown = defaultdict(list)
        for a in assignments:
            shown[a.worker_id].extend(u.conversation_id for u in hit_units[a.hit_id])
            # The segment order shown is the assignment's own shuffle of the HIT, recorded.
            assert sorted(a.layout["order"]) == sorted(u.id for u in hit_units[a.hit_id])
        # No worker was ever shown two segments of one conversation; nobody over the cap.
        assert all(len(c) == len(set(c)) for c in shown.values())
        assert max(Counter(a.worker_id for a in assignments if a.status in ACTIVE_STATUSES).values()) <= 3
        # Every segment: exactly two annotations, by distinct workers, all five questions answered.
        done = [a for a in assignments if a.status in DONE_STATUSES]
        annotators = defaultdict(list)
        for a in done:
            for u in hit_units[a.hit_id]:
                annotators[u.id].append(a.worker_id)
        assert all(len(w) == 2 and len(set(w)) == 2 for w in annotators.values()) and len(annotators) == len(units)
        answered = Counter((r.assignment_id, r.unit_id) for r in s.scalars(select(Response)))
        assert set(answered.values()) == {5}
        n_done = len(done)

    export = out / "export"
    table = pd.read_csv(export / "annotations.csv", dtype=str, keep_default_na=False)
    assert list(table.columns) == [
        "study",
        "hit_id",
        "assignment_id",
        "worker_id",
        "conversation_id",
        "segment_exchanges",
        "entity",
        "system",
        "label",
        "fluency",
        "sensibleness",
        "specificity",
        "elapsed_s",
    ]
    assert len(table) == 2 * 2 * len(units)
    assert set(table["fluency"]) <= {"+1", "0", "-1"} and set(table["label"]) <= {"human", "bot", "unsure"}
    assert (table["elapsed_s"] != "").all()
    assert table["assignment_id"].nunique() == n_done
    ann = read_annotations(export)  # the analysis accepts the export as it is
    assert len(ann) == len(table)
    conversations = [json.loads(line) for line in (export / "conversations.jsonl").read_text().splitlines()]
    assert Counter(c["kind"] for c in conversations) == {"bot_bot": 12, "human_human": 3}
    assert all(len(c["turns"]) >= 10 for c in conversations)

    # The simulated annotators behave as configured: the weakest bot is spotted far more often
    # than the strongest, and people are mostly taken for people.
    diligent = ann[ann["worker_id"].str.startswith("sim-diligent")]
    bot_share = diligent.groupby("system")["label"].apply(lambda x: (x == "bot").mean())
    assert bot_share["gamma"] > bot_share["alpha"] + 0.3
    assert (diligent.loc[diligent["system"] == "human", "label"] == "human").mean() > 0.7
    analysis = out / "analysis"
    wins = pd.read_csv(analysis / "win_rates.csv")
    alpha_gamma = wins[(wins["system_a"] == "alpha") & (wins["system_b"] == "gamma")]
    assert alpha_gamma["win_rate"].iloc[0] > 0.6
    assert (analysis / "ranking.csv").exists() and (analysis / "annotation_time.csv").exists()


def _posted_study(tmp_path, database_url):
    config = load_study(stb_study(tmp_path, database_url))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, "http://127.0.0.1:9")
    return ctx


def test_a_worker_is_refused_a_hit_with_a_conversation_they_have_seen_even_after_returning(tmp_path, database_url):
    ctx = _posted_study(tmp_path, database_url)
    with session_scope(database_url) as s:
        convs = {h.id: {hu.unit.conversation_id for hu in h.units} for h in s.scalars(select(Hit))}
    first = min(convs)
    sharing = sorted(h for h in convs if h != first and convs[h] & convs[first])
    apart = sorted(h for h in convs if not convs[h] & convs[first])
    assert len(sharing) == len(LENGTHS) - 1 and apart  # a block of 3 HITs, and another block

    def arrive(session, worker, hit):
        return enter(session, ctx, hit, {"workerId": worker, "assignmentId": f"{worker}-{hit}", "hitId": str(hit)})

    with session_scope(database_url) as s:
        token = arrive(s, "W1", first).token
    with session_scope(database_url) as s:
        return_assignment(s, ctx, token)  # gives it back: the place re-opens, what was read stays read
    for hit in sharing:
        with session_scope(database_url) as s, pytest.raises(FlowError, match="already seen part of") as refused:
            arrive(s, "W1", hit)
        assert refused.value.status == 409
    with session_scope(database_url) as s:
        # The HITs a worker is offered leave out those the task refuses them: here, the whole block.
        worker = s.scalar(select(Worker).where(Worker.external_id == "W1"))
        offered = {h.id for h in open_hits(s, ctx.study_id, worker, utcnow(), ctx.task)}
        assert offered == set(apart)
        assert {h.id for h in open_hits(s, ctx.study_id, worker, utcnow())} == set(convs) - {first}
        assert arrive(s, "W1", apart[0]).assignment is not None
        # Another worker may take the returned place and any HIT of the block.
        assert arrive(s, "W2", first).assignment is not None
    with session_scope(database_url) as s:
        assert arrive(s, "W3", sharing[0]).assignment is not None


def test_bad_bot_bot_material_is_refused_with_file_and_line(tmp_path, database_url):
    study_file = stb_study(tmp_path, database_url)
    lines = (tmp_path / "bot_bot.jsonl").read_text().splitlines()
    short = json.loads(lines[2])
    short["turns"] = short["turns"][:6]
    lines[2] = json.dumps(short)
    (tmp_path / "bot_bot.jsonl").write_text("\n".join(lines) + "\n")
    config = load_study(study_file)
    with session_scope(database_url) as s, pytest.raises(Exception, match=r"bot_bot.jsonl line 3: .* 3 exchanges"):
        create_study(s, config, study_file, resolve_secret(database_url))
    with session_scope(database_url) as s:
        assert s.scalar(select(Study)) is None


def test_the_section_is_optional_and_checked_against_generation(tmp_path):
    base = {"study": "s", "task": "spot_the_bot", "budget": "1.00", "systems": [{"name": "a"}, {"name": "b"}]}
    assert parse_study(base).spot_the_bot is None  # every setting has a default
    with pytest.raises(ConfigError, match="generate at least 5 exchanges"):
        parse_study({**base, "generation": {"exchanges": 3}})
    with pytest.raises(ConfigError, match="segment lengths must be distinct"):
        parse_study({**base, "spot_the_bot": {"segment_lengths": [2, 2]}})
    assert parse_study({**base, "spot_the_bot": {"segment_lengths": [3, 1, 2]}}).spot_the_bot.segment_lengths == [
        1,
        2,
        3,
    ]
    with pytest.raises(ConfigError, match="needs 6 different workers"):
        parse_study({**base, "simulated": {"workers": [{"profile": "diligent", "count": 5}]}})


def test_human_material_defaults_to_one_pairs_share_and_says_when_the_corpus_is_too_short(tmp_path):
    config = load_study(stb_study(tmp_path, "sqlite://", human_count=None))
    material = task_for(config).build()
    # 12 bot–bot conversations over 6 pairs: 2 human–human ones, each long enough for k = 5.
    human = [c for c in material.conversations if c.kind == "human_human"]
    assert len(human) == 2 and all(len(c.turns) >= 10 for c in human)
    assert all(t.system is None and t.speaker in ("0", "1") for c in human for t in c.turns)
    config = load_study(stb_study(tmp_path, "sqlite://", human_file=False, human_count=50))
    with pytest.raises(ConfigError, match="chatterbot-corpus has 4 .*human_conversations"):
        task_for(config).build()


def test_from_bot_bot_generation_to_annotations_in_one_launch(tmp_path, one_database_url):
    """launch generates the bot–bot material over the OpenAI protocol, then runs the labelling study."""
    database_url = one_database_url  # one store: what this test checks is not storage
    from hitkit.bots.server import BotServer, DegradedSpec, build_backends

    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in QUALITY], seed=4), port=0).start()
    try:
        write_human_human(tmp_path / "human.jsonl")
        data = {
            "study": "stb-gen",
            "task": "spot_the_bot",
            "seed": 8,
            "budget": "100.00",
            "out": str(tmp_path / "runs"),
            "database": database_url,
            "systems": [{"name": n, "url": server.url, "model": n} for n in QUALITY],
            "generation": {"conversations_per_pair": 2, "exchanges": 5, "parallel": 4},
            "spot_the_bot": {
                "human_conversations": "human.jsonl",
                "segment_lengths": LENGTHS,
                "segments_per_hit": 8,
                "human_count": 3,
            },
            "schedule": {"per_worker_cap": 3, "interval_s": 0.3, "wave_size": 10, "max_concurrent": 10},
            "simulated": {"workers": [{"profile": "diligent", "count": 8}], "quality": QUALITY, "concurrency": 6},
        }
        study_file = tmp_path / "study.yaml"
        study_file.write_text(yaml.safe_dump(data, sort_keys=False))
        result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    finally:
        server.shutdown()
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "stb-gen"
    generated = [json.loads(line) for line in (out / "bot_bot.jsonl").read_text().splitlines()]
    assert len(generated) == 12  # 3 pairs + 3 self-chats, 2 each
    annotations = read_annotations(out / "export")
    with session_scope(database_url) as s:
        kinds = Counter(c.kind for c in s.scalars(select(Conversation)))
        assert kinds["bot_bot"] == 12 and kinds["human_human"] == 3
        required = {u.id: u.required_answers for u in s.scalars(select(Unit))}
    # Two annotations (two rows each: entity 0 and 1) per segment.
    assert len(annotations) == 2 * 2 * len(required)
    assert set(annotations["conversation_id"]) >= {f"bb:{c['id']}" for c in generated}
