"""An arena study with an LLM judge: the worker votes on a random share of the real battles, the judge
on every real battle in both display orders, and the exports say which battles have a worker's vote."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from sqlalchemy import select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import JudgeLabel, Response, Unit
from hitkit.db.session import session_scope
from hitkit.protocols.arena.judge import JUDGE_COLUMNS
from tests.studies import launch
from tests.test_arena_study import REAL, arena_study
from tests.test_judge import JudgeServer, serving


class LeftJudge(JudgeServer):
    """Votes for whichever conversation it is shown first (A), except every fifth request, which names
    no label (stored as a tie, unparsed): a judge with a pure position bias."""

    def answer(self, prompt: str) -> tuple[int, str]:
        with self.lock:
            self.prompts.append(prompt)
            n = len(self.prompts)
        return 200, "I cannot tell." if n % 5 == 0 else "[[A]]"


@pytest.fixture
def judge():
    yield from serving(LeftJudge())


@pytest.fixture(scope="module")
def bot_server():
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*REAL, "qc"]], seed=4), port=0).start()
    yield server.url
    server.shutdown()


def test_the_judge_votes_every_real_battle_in_both_orders_and_workers_a_random_share(
    tmp_path, one_database_url, bot_server, judge
):
    database_url = one_database_url  # one store: what this test checks is not storage
    path = arena_study(tmp_path, database_url, bot_server, hits=6)
    data = yaml.safe_load(path.read_text())
    data["judge"] = {
        "url": judge.url,
        "model": "left-judge",
        "human_share": 0.5,
        "options": {"retries": 0, "timeout_s": 10, "concurrency": 4},
    }
    data["simulated"]["workers"] = [{"profile": "diligent", "count": 6}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = launch(path, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300, analyse=False)
    assert result.crowd_errors == [] and result.judged
    out = tmp_path / "runs" / "arena-demo" / "export"
    with session_scope(database_url) as s:
        units = s.scalars(select(Unit)).all()
        voted = {u.id for u in units if u.payload.get("voted", True)}
        real = [u for u in units if not u.payload["is_control"]]
        assert 0 < sum(u.payload["voted"] for u in real) < len(real)  # a random share of the real battles
        answers = {(r.unit_id, r.question) for r in s.scalars(select(Response))}
        assert {u for u, q in answers if q == "vote"} == voted  # a vote exactly where one was drawn
        assert {u for u, q in answers if q == "vote_done"} == {u.id for u in units} - voted
        labels = s.scalars(select(JudgeLabel)).all()
        assert len(labels) == 2 * len(real) and {r.variant for r in labels} == {"ab", "ba"}
    assert len(judge.prompts) == 2 * len(real)  # one request per battle and order, none asked twice
    battles = pd.read_csv(out / "battles.csv", keep_default_na=False)
    assert len(battles) == len(voted)
    table = pd.read_csv(out / "judge.csv", keep_default_na=False)
    assert tuple(table.columns) == JUDGE_COLUMNS and len(table) == 2 * len(real)
    for _, pair in table.groupby("battle_id"):
        ab, ba = pair.set_index("order").loc["ab"], pair.set_index("order").loc["ba"]
        assert (ab["system_a"], ab["system_b"]) == (ba["system_b"], ba["system_a"])  # the sides swapped
    parsed = table["parsed"].astype(str) == "True"
    assert (table.loc[parsed, "vote"] == "a").all() and (table.loc[~parsed, "vote"] == "tie").all()
    assert (~parsed).sum() == len(real) * 2 // 5
    human = set(table.loc[table["human_subset"].astype(str) == "True", "battle_id"])
    assert human == set(battles.loc[battles["is_control"] == 0, "battle_id"])
