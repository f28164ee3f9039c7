"""Pairwise studies with an LLM judge (the study file's ``judge:``): a scripted OpenAI-compatible judge
over real HTTP labels every comparison in both orders, the simulated crowd votes on a random share,
and the analysis reports human-only, judge-only and prediction-powered win rates."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from sqlalchemy import func, select

from hitkit.db.migrate import upgrade
from hitkit.db.models import Hit, HitUnit, JudgeLabel, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, HitkitError
from hitkit.judges.human_subset import human_subset
from hitkit.judges.judging import judge_study
from hitkit.protocols import task_for
from hitkit.protocols.pairwise.judge import items, parse
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.studies import REPO, launch, pairwise_study

QUALITY = {"alpha": 0.85, "beta": 0.5, "gamma": 0.2}
FAVOURED = "gamma"
"""The scripted judge's pet system: it prefers gamma's replies far more than people do."""
RESPONSES = [json.loads(line) for line in (REPO / "examples" / "data" / "ab_responses.jsonl").read_text().splitlines()]
UNITS = 3 * len(RESPONSES)  # three pairs per prompt
IDENTICAL = 2  # q07 and q19: beta and gamma wrote the same reply, a tie without asking
ASKED = 2 * UNITS - 2 * IDENTICAL
DISTINCT = ASKED - 4  # in q07 and q19, alpha against beta reads exactly as alpha against gamma


class JudgeServer(ThreadingHTTPServer):
    """An OpenAI-compatible server on a free loopback port, answering each chat-completions request with
    :meth:`reply_to` (by default :meth:`answer` to the last message); the scripted judges of the judge
    tests subclass it."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _JudgeHandler)
        self.lock = threading.Lock()
        self.prompts: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reply_to(self, body: dict) -> tuple[int, str]:
        """(HTTP status, reply text) for one chat-completions request body."""
        return self.answer(body["messages"][-1]["content"])

    def answer(self, prompt: str) -> tuple[int, str]:
        raise NotImplementedError


class ScriptedJudge(JudgeServer):
    """An OpenAI-compatible judge: reads the two responses from the prompt, knows which system wrote
    each, and prefers the better one, with a strong bias toward :data:`FAVOURED` and a slight one for
    position A. Deterministic per prompt. ``fail_after``: answer HTTP 500 from that request on;
    ``fail_first``: answer 500 to that many requests first."""

    def __init__(self, fail_after: int | None = None, fail_first: int = 0):
        super().__init__()
        self.writer = {(row["prompt"], text): system for row in RESPONSES for system, text in row["responses"].items()}
        self.fail_after, self.fail_first = fail_after, fail_first
        self.requests = 0

    def answer(self, prompt: str) -> tuple[int, str]:
        with self.lock:
            self.requests += 1
            n = self.requests
            failing = n <= self.fail_first or (self.fail_after is not None and n > self.fail_after)
            if not failing:
                self.prompts.append(prompt)
        if failing:
            return 500, "scripted judge failure"
        message = re.search(r"Message:\n(.*)\n\nResponse A:", prompt, re.S).group(1)
        a = self.writer[message, re.search(r"Response A:\n(.*)\n\nResponse B:", prompt, re.S).group(1)]
        b = self.writer[message, re.search(r"Response B:\n(.*)\n\nWhich", prompt, re.S).group(1)]
        logit = 8 * (QUALITY[a] - QUALITY[b]) + 4 * ((a == FAVOURED) - (b == FAVOURED)) + 0.3
        u = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) / 16**8
        return 200, "A" if u < 1 / (1 + math.exp(-logit)) else "B. Response B is better."


class _JudgeHandler(BaseHTTPRequestHandler):
    """Answers every POST as OpenAI's chat completions would, with its server's :meth:`reply_to`."""

    protocol_version = "HTTP/1.1"
    server: ScriptedJudge

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, text = self.server.reply_to(body)
        reply = (
            {"choices": [{"message": {"role": "assistant", "content": text}}]}
            if status == 200
            else {"error": {"message": text}}
        )
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serving(server: ThreadingHTTPServer):
    """A fixture's body: ``server`` served on a thread while the test runs, then shut down."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def judge_server(request):
    yield from serving(ScriptedJudge(**getattr(request, "param", {})))


def judged_study(tmp_path, database_url, judge_url, **judge):
    options = {"retries": 0, "backoff_s": 0, "timeout_s": 10, "concurrency": 4, **judge.pop("options", {})}
    return pairwise_study(
        tmp_path,
        database_url,
        judge={"url": judge_url, "model": "scripted-judge", "human_share": 0.3, "options": options, **judge},
    )


def quiet(_message):
    pass


def test_a_judged_study_labels_every_comparison_in_both_orders_and_reports_prediction_powered_win_rates(
    tmp_path, one_database_url, judge_server
):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = judged_study(tmp_path, database_url, judge_server.url)
    lines = []
    result = launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=240)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "ab-demo"

    # Every comparison judged once in each order, and nothing asked twice.
    assert len(judge_server.prompts) == ASKED and len(set(judge_server.prompts)) == DISTINCT
    with session_scope(database_url) as s:
        labels = s.scalars(select(JudgeLabel)).all()
        assert len(labels) == 2 * UNITS
        assert Counter((r.unit_key, r.variant) for r in labels).most_common(1)[0][1] == 1
        assert {r.status for r in labels} == {"done"} and sum(r.source == "auto" for r in labels) == 2 * IDENTICAL
        # Only the crowd's share became units and reached HITs: 30 % of each pair's 30 prompts.
        keys = set(s.scalars(select(Unit.key)))
        assert len(keys) == 27 and Counter(k.split(":")[1] for k in keys) == {
            "alpha~beta": 9,
            "alpha~gamma": 9,
            "beta~gamma": 9,
        }
        posted = set(s.scalars(select(Unit.key).join(HitUnit, HitUnit.unit_id == Unit.id)))
        assert posted == keys
        assert s.scalar(select(Study.status)) == "completed"

    judge = pd.read_csv(out / "export" / "judge.csv", dtype={"item_id": str})
    assert len(judge) == 2 * UNITS and judge["human_subset"].sum() == 2 * 27
    votes = pd.read_csv(out / "export" / "votes.csv", dtype={"item_id": str})
    voted = {(i, *sorted((a, b))) for i, a, b in votes[["item_id", "system_a", "system_b"]].itertuples(index=False)}
    subset = {
        (i, *sorted((a, b)))
        for i, a, b, h in judge[["item_id", "system_a", "system_b", "human_subset"]].itertuples(index=False)
        if h
    }
    assert voted == subset  # the crowd voted on the subset, all of it, and on nothing else

    rates = pd.read_csv(out / "analysis" / "judge_win_rates.csv")
    assert list(rates[["system_a", "system_b"]].itertuples(index=False, name=None)) == [
        ("alpha", "beta"),
        ("alpha", "gamma"),
        ("beta", "gamma"),
    ]
    assert (rates["n_human"] == 9).all() and (rates["n_judge"] == 30).all()
    for kind in ("human", "judge", "ppi"):
        assert ((rates[f"{kind}_low"] <= rates[kind]) & (rates[kind] <= rates[f"{kind}_high"])).all()
    assert rates["lam"].between(0, 1).all() and rates["n_effective"].gt(0).all()
    assert (rates["fallback"] == (rates["lam"] == 0)).all()
    # The judge's pet system is the one it is most biased toward, far more than people are.
    bias = pd.read_csv(out / "analysis" / "judge_bias.csv").set_index("system")["bias"]
    assert bias.idxmax() == FAVOURED and bias[FAVOURED] > 0.1 > bias.drop(FAVOURED).max()
    strengths = pd.read_csv(out / "analysis" / "judge_strengths.csv")
    assert sorted(strengths["system"]) == ["alpha", "beta", "gamma"] and strengths["lam"].between(0, 1).all()
    assert (strengths["n_human"] == 18).all() and (strengths["n_judge"] == 60).all()
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert summary["judge"]["items"] == UNITS and summary["judge"]["human_items"] == 27
    assert any(line.startswith("Judge: 180 labels planned") for line in lines)

    from hitkit.report.build import report

    files = report(out, tmp_path / "report")
    html = files.html.read_text()
    assert "People and the LLM judge" in html and "judge_win_rates" in " ".join(p.name for p in files.figures)
    assert "Strengths: people, judge, prediction-powered" in html and "Bradley–Terry strengths combine" in files.methods
    assert "PPI++" in files.methods and "Angelopoulos" in files.methods and "jackknife t" in files.methods


@pytest.mark.parametrize("judge_server", [{"fail_after": 60}], indirect=True)
def test_a_failing_judge_is_reported_posts_nothing_and_a_resume_asks_only_for_the_missing_labels(
    tmp_path, one_database_url, judge_server
):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = judged_study(tmp_path, database_url, judge_server.url)
    with pytest.raises(HitkitError, match=r"the judge \(scripted-judge .*\) failed on 116 of 180 labels .*HTTP 500"):
        launch(study_file, yes=True, show_progress=False, echo=quiet, timeout_s=60)
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "draft"
        assert s.scalar(select(func.count()).select_from(Hit).where(Hit.status != "pending")) == 0
        failed = s.scalars(select(JudgeLabel).where(JudgeLabel.status == "failed")).all()
        assert len(failed) == ASKED - 60 and all("HTTP 500" in r.error and r.attempts == 1 for r in failed)
    good = list(judge_server.prompts)

    judge_server.fail_after = None
    launch(study_file, yes=True, resume=True, show_progress=False, echo=quiet, timeout_s=240)
    assert judge_server.requests == ASKED + ASKED - 60  # the second run asked only for the failed labels
    assert len(set(judge_server.prompts)) == DISTINCT and judge_server.prompts[:60] == good
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        rows = s.scalars(select(JudgeLabel)).all()
        assert {r.status for r in rows} == {"done"} and len(rows) == 2 * UNITS
        assert sorted(Counter(r.attempts for r in rows if r.source == "judge").items()) == [(1, 60), (2, ASKED - 60)]


@pytest.mark.parametrize("judge_server", [{"fail_first": 3}], indirect=True)
def test_judging_stopped_halfway_resumes_without_asking_again_and_retries_transient_failures(
    tmp_path, database_url, judge_server
):
    study_file = judged_study(tmp_path, database_url, judge_server.url, options={"retries": 2, "concurrency": 3})
    config = load_study(study_file)
    upgrade(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, resolve_secret(database_url))
    from hitkit.judges.judging import judge_client

    stop, asked = threading.Event(), Counter()
    client = judge_client(config)

    def ask(prompt: str) -> str:
        asked[prompt] += 1
        if sum(asked.values()) >= 50:
            stop.set()  # as if the process were killed here: what is in flight finishes, nothing more starts
        return client(prompt)

    first = judge_study(config, database_url, ctx.study_id, ask=ask, stop=stop)
    assert first.failed == [] and 50 <= first.judged < ASKED  # the three 500s were retried by the client
    second = judge_study(config, database_url, ctx.study_id)
    assert second.already_done == first.judged + first.auto and second.judged == ASKED - first.judged
    assert len(judge_server.prompts) == ASKED and len(set(judge_server.prompts)) == DISTINCT  # none asked twice
    third = judge_study(config, database_url, ctx.study_id)
    assert (third.judged, third.auto, third.already_done) == (0, 0, 2 * UNITS)
    assert judge_server.requests == ASKED + 3


def test_a_reply_becomes_a_label_and_items_average_both_orders_and_every_vote():
    assert [
        parse(r)
        for r in ("A", " b.", "Tie", "**A**", "The answer is B", "Verdict: [[B]]", "Response A", "I think both", "")
    ] == ["a", "b", "tie", "a", "b", "b", "a", None, None]
    judge = pd.DataFrame(
        {
            "item_id": ["q1", "q1", "q2", "q2"],
            "system_a": ["x", "y", "y", "x"],
            "system_b": ["y", "x", "x", "y"],
            "vote": ["a", "a", "tie", "b"],
        }
    )
    votes = pd.DataFrame(
        {
            "item_id": ["q1", "q1", "q1"],
            "system_a": ["x", "y", "x"],
            "system_b": ["y", "x", "y"],
            "vote": ["a", "a", "tie"],
            "worker_id": ["w1", "w2", "w3"],
        }
    )
    table = items(votes, judge).set_index("item_id")
    # q1: the judge preferred whatever was shown first (x once, y once): ½; people: 1, 0, ½.
    assert table.loc["q1", "judge"] == 0.5 and table.loc["q1", "human"] == pytest.approx(0.5)
    assert table.loc["q2", "judge"] == 0.25 and math.isnan(table.loc["q2", "human"])


def _config(tmp_path, database_url, **judge):
    return load_study(
        pairwise_study(tmp_path, database_url, judge={"url": "http://127.0.0.1:9", "model": "j", **judge})
    )


@pytest.mark.parametrize(
    "judge, message",
    [
        ({}, "give exactly one of human_share"),
        ({"human_share": 0.2, "human_items": 10}, "give exactly one of human_share"),
        ({"human_share": 1.5}, "human_share: Input should be less than or equal to 1"),
        ({"human_share": 0.2, "url": "127.0.0.1:8011"}, "must be an http"),
        ({"human_share": 0.2, "prompt": "Which is better, {response_a} or {response_b}?"}, "it lacks {prompt}"),
        ({"human_share": 0.2, "prompt": "{prompt} {response_a} {response_b} {reference}"}, "it names {reference}"),
        ({"human_share": 0.2, "prompt": "{prompt} {response_a} {response_b} {"}, "stray brace"),
        ({"human_share": 0.2, "temperature": 0}, "judge.temperature: Extra inputs are not permitted"),
    ],
)
def test_bad_judge_sections_give_clear_errors(tmp_path, database_url, judge, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _config(tmp_path, database_url, **judge)


@pytest.mark.parametrize(
    "judge, message",
    [
        ({"human_items": 91}, "judge.human_items is 91 but the study has only 90 items"),
        ({"human_share": 0.05}, "judge.human_share 0.05 sends 2 of the 30 items"),
        ({"human_share": 0.04}, "judge.human_share 0.04 sends 1 of the 30 items of alpha~beta to the crowd"),
    ],
)
def test_a_crowd_share_too_large_or_too_small_is_refused_before_anything_is_stored(
    tmp_path, database_url, judge, message
):
    config = _config(tmp_path, database_url, **judge)
    units = task_for(config).build().units
    if "0.05" in message:  # 0.05 × 30 = 1.5 rounds to 2: enough
        assert len(human_subset(config, units)) == 6
        return
    with pytest.raises(ConfigError, match=re.escape(message)):
        human_subset(config, units)


def test_the_crowds_share_is_uniform_within_each_pair_seeded_and_sized_by_count(tmp_path, database_url):
    config = _config(tmp_path, database_url, human_items=20)
    units = task_for(config).build().units
    chosen = human_subset(config, units)
    assert [u.key for u in chosen] == [u.key for u in human_subset(config, units)]  # seeded
    assert sorted(Counter(u.key.split(":")[1] for u in chosen).values()) == [6, 7, 7]
    other = human_subset(config.model_copy(update={"seed": config.seed + 1}), units)
    assert {u.key for u in other} != {u.key for u in chosen}


def test_a_protocol_without_a_judge_refuses_the_judge_section(tmp_path, database_url):
    from tests.test_rating import rating_study

    path = rating_study(tmp_path, database_url)
    import yaml

    data = yaml.safe_load(path.read_text())
    data["judge"] = {"url": "http://127.0.0.1:9", "model": "j", "human_share": 0.2}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match="judge: is available for .*live_chat.* studies only .* not for task 'rating'"
    ):
        load_study(path)


def test_the_example_judged_study_validates():
    config = load_study(REPO / "examples" / "pairwise_judge.yaml")
    assert config.judge is not None and config.judge.options.temperature == 0
