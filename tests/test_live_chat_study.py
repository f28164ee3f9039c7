"""A whole live-chat study: simulated workers chat through the real pages with bots served over the
OpenAI protocol, rate, and the analysis keeps the diligent and drops the spammers."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
import yaml
from sqlalchemy import func, select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Conversation, Study, System, Turn
from hitkit.db.session import session_scope
from tests.studies import launch

REAL = {"anna": 0.9, "bert": 0.75, "cleo": 0.6, "dora": 0.45, "emil": 0.3}


@pytest.fixture(scope="module")
def bot_server():
    """Every system is a degraded bot here: the crowd judges by configured quality, not by text."""
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*REAL, "qc"]], seed=1), port=0).start()
    yield server.url
    server.shutdown()


def live_chat_study(tmp_path, database_url, bot_url, **live_chat) -> str:
    data = {
        "study": "chat-demo",
        "task": "live_chat",
        "seed": 5,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": database_url,
        "systems": [
            {"name": n, "url": bot_url, "model": n, "options": {"max_tokens": 20, "timeout_s": 10}}
            for n in [*REAL, "qc"]
        ],
        "live_chat": {"hits": 20, "min_inputs": 2, **live_chat},
        "hit": {"title": "Chat with six chatbots", "reward": "2.00"},
        "schedule": {"per_worker_cap": 1, "interval_s": 0.5, "wave_size": 20, "max_concurrent": 20},
        # Half the spammers rate at random, so each of those passes the QC test with probability ~0.05.
        "simulated": {
            "workers": [{"profile": "diligent", "count": 10}, {"profile": "spammer", "count": 10}],
            "quality": {**REAL, "qc": 0.05},
            "concurrency": 7,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_simulated_live_chat_study_filters_spammers_and_ranks_systems_in_order(tmp_path, one_database_url, bot_server):
    # One store (PostgreSQL where there is one): the subject is the QC and ranking policy; storing chats
    # and ratings on both stores is checked by test_live_chat_task.py, test_security.py and the fault tests.
    database_url = one_database_url
    study_file = live_chat_study(tmp_path, database_url, bot_server)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "chat-demo"
    workers = pd.read_csv(out / "analysis" / "workers.csv")
    diligent = workers[workers["worker_id"].str.startswith("sim-diligent")]
    spammers = workers[workers["worker_id"].str.startswith("sim-spammer")]
    assert len(diligent) == 10 and len(spammers) == 10
    assert diligent["passed"].mean() >= 0.9
    assert (~spammers["passed"].astype(bool)).mean() >= 0.9
    systems = pd.read_csv(out / "analysis" / "systems.csv").sort_values("rank")
    assert list(systems["system"]) == list(REAL)

    ratings = pd.read_csv(out / "export" / "ratings.csv")
    assert len(ratings) == 20 * 6 * 7
    # Every system had the same number of conversations; the QC bot one per HIT.
    per_system = ratings.drop_duplicates("conversation_id")["system"].value_counts()
    assert set(per_system[list(REAL)]) == {20} and per_system["qc"] == 20
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assert s.scalar(select(System.name).where(System.is_control)) == "qc"
        # Every conversation alternates worker and bot and has at least min_inputs worker turns.
        for conv in s.scalars(select(Conversation).where(Conversation.kind == "human_bot")):
            speakers = [
                t.speaker for t in s.scalars(select(Turn).where(Turn.conversation_id == conv.id).order_by(Turn.index))
            ]
            assert speakers[::2] == ["worker"] * len(speakers[::2])
            assert speakers[1::2] == ["bot"] * len(speakers[1::2])
            assert Counter(speakers)["worker"] >= 2
        assert s.scalar(select(func.count()).select_from(Conversation).where(Conversation.kind == "human_bot")) == 120
