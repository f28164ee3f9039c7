"""A whole arena study: simulated workers battle through the real pages (real HTTP) against bots served
over the OpenAI protocol, vote, and the exports hold every battle with its sides, style and flags."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest
import yaml
from sqlalchemy import func, select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Conversation, Response, Turn
from hitkit.db.session import session_scope
from hitkit.protocols.arena.columns import BATTLE_COLUMNS
from tests.studies import launch

REAL = {"anna": 0.9, "bert": 0.6, "cleo": 0.3}
PROMPTS = Path(__file__).resolve().parents[1] / "examples" / "data" / "arena_prompts.jsonl"


@pytest.fixture(scope="module")
def bot_server():
    """Every system is a degraded bot here: the crowd votes from configured quality, not from the text."""
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*REAL, "qc"]], seed=2), port=0).start()
    yield server.url
    server.shutdown()


def arena_study(tmp_path, database_url, bot_url, **arena) -> Path:
    data = {
        "study": "arena-demo",
        "task": "arena",
        "seed": 7,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": database_url,
        "systems": [
            {"name": n, "url": bot_url, "model": n, "options": {"max_tokens": 30, "timeout_s": 10}}
            for n in [*REAL, "qc"]
        ],
        "arena": {
            "hits": 12,
            "battles_per_hit": 5,
            "control": "qc",
            "control_share": 0.2,
            "prompts": str(PROMPTS),
            **arena,
        },
        "hit": {"title": "Compare two assistants", "reward": "1.00"},
        "schedule": {"per_worker_cap": 1, "interval_s": 0.5, "wave_size": 12, "max_concurrent": 12},
        "simulated": {
            "workers": [{"profile": "diligent", "count": 9}, {"profile": "spammer", "count": 3}],
            "quality": {**REAL, "qc": 0.05},
            "concurrency": 6,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_simulated_arena_study_exports_every_battle_with_balanced_sides_style_and_qc(
    tmp_path, one_database_url, bot_server
):
    database_url = one_database_url  # one store: what this test checks is not storage
    # One HIT a worker (4 real votes, 1 QC vote): too few for either QC test, so every worker is "not
    # judged"; this study lets their votes into preferences.jsonl (the default leaves them out).
    result = launch(
        arena_study(tmp_path, database_url, bot_server, unjudged="include"),
        yes=True,
        show_progress=False,
        echo=lambda _m: None,
        timeout_s=400,
        analyse=False,
    )
    assert result.crowd_errors == []
    assert "not judged yet" in result.qc_line and "all 12 workers passed" not in result.qc_line
    out = tmp_path / "runs" / "arena-demo" / "export"
    battles = pd.read_csv(out / "battles.csv", keep_default_na=False)
    assert tuple(battles.columns) == BATTLE_COLUMNS
    assert len(battles) == 60 and battles["battle_id"].is_unique  # 12 HITs × 5 battles, one vote each
    assert set(battles["vote"]) <= {"a", "b", "tie", "both_bad"}
    control = battles[battles["is_control"] == 1]
    assert len(control) == 12 and all((control["system_a"] == "qc") ^ (control["system_b"] == "qc"))
    real = battles[battles["is_control"] == 0]
    # Uniform over pairs, and each pair's A/B positions balanced.
    per_pair = Counter(tuple(sorted(p)) for p in zip(real["system_a"], real["system_b"]))
    assert set(per_pair) == set(combinations(sorted(REAL), 2)) and max(per_pair.values()) - min(per_pair.values()) <= 1
    for (x, y), n in per_pair.items():
        left = int(((real["system_a"] == x) & (real["system_b"] == y)).sum())
        assert abs(left - (n - left)) <= 1
    # Prompts come from the study's set, with their categories; every battle had at least one exchange.
    prompts = {json.loads(line)["id"]: json.loads(line)["category"] for line in PROMPTS.read_text().splitlines()}
    assert all(prompts[p] == c for p, c in zip(battles["prompt_id"], battles["category"]))
    assert (battles["turns"] >= 1).all() and (battles["tokens_a"] > 0).all() and (battles["tokens_b"] > 0).all()
    # The diligent prefer the real system in QC battles; the best real system beats the worst.
    diligent = control[control["worker_id"].str.startswith("sim-diligent")]
    real_won = ((diligent["system_a"] != "qc") & (diligent["vote"] == "a")) | (
        (diligent["system_b"] != "qc") & (diligent["vote"] == "b")
    )
    assert real_won.mean() >= 0.8
    ac = real[
        real["worker_id"].str.startswith("sim-diligent")
        & real["system_a"].isin(["anna", "cleo"])
        & real["system_b"].isin(["anna", "cleo"])
    ]
    anna_won = ((ac["system_a"] == "anna") & (ac["vote"] == "a")) | ((ac["system_b"] == "anna") & (ac["vote"] == "b"))
    assert anna_won.mean() >= 0.7
    # The database: two conversations per battle, replies whole and timed.
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Conversation)) == 120
        assert s.scalar(select(func.count()).select_from(Response).where(Response.question == "vote")) == 60
        assert (
            s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "bot", Turn.reply_ms.is_(None))) == 0
        )
        sides = Counter(c.meta["side"] for c in s.scalars(select(Conversation)))
        assert sides == {"a": 60, "b": 60}
    # preferences.jsonl: the decisive votes of real battles without a leak, the winner's conversation chosen.
    prefs = [json.loads(line) for line in (out / "preferences.jsonl").read_text().splitlines()]
    # Workers who fail QC never count there (here: spammers whose votes the voter test flags).
    from hitkit.protocols.arena.analysis import worker_table

    verdicts = worker_table(battles.assign(vote=battles["vote"].astype(str)))
    failed = set(verdicts.loc[verdicts["status"] == "failed", "worker_id"])
    assert all(w.startswith("sim-spammer") for w in failed)
    decisive = real[real["vote"].isin(["a", "b"]) & (real["leak"] == 0) & ~real["worker_id"].isin(failed)]
    assert len(prefs) == len(decisive) > 0 and not {p["worker_id"] for p in prefs} & failed
    by_id = battles.set_index("battle_id")
    for p in prefs:
        row = by_id.loc[p["battle_id"]]
        assert p["chosen_system"] == row["system_" + row["vote"]] and p["prompt"][0]["role"] == "user"
        assert p["chosen"][0]["role"] == "assistant" and p["rejected"][0]["role"] == "assistant"
    # How each message was typed: one row per message, though both sides got it.
    typed = pd.read_csv(out / "authenticity.csv", keep_default_na=False)
    assert (typed["kind"] == "message").sum() == battles["turns"].sum()
    assert typed.loc[typed["kind"] == "message", "conversation_id"].str.endswith(":a").all()
    turns = [
        t
        for line in (out / "conversations.jsonl").read_text().splitlines()
        for t in json.loads(line)["turns"]
        if t["speaker"] == "bot"
    ]
    assert turns and all(t["reply_ms"] >= t["first_token_ms"] >= 0 for t in turns)
