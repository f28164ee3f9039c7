"""The hidden design stays hidden: nothing a worker can see tells the QC slot or the human–human
material apart from the rest.

Units are created in a fixed order (the control system's chat slots last, human–human Spot The Bot
segments after the bot–bot ones), so their row ids carry the design. Workers see only each unit's
random public key, in a shuffled order. These tests take many HITs over real HTTP (gunicorn +
PostgreSQL, waitress + SQLite), read every id and position a worker is shown — ``/state``, the chat
URLs, the form fields — and check that none of them predicts the QC slot or the material's origin
better than chance, while the row ids, checked the same way, would give it away.
"""

from __future__ import annotations

import re
from collections import Counter

import requests
import yaml
from sqlalchemy import select, update

from hitkit.db.models import Hit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.test_concurrency import serving
from tests.test_live_chat_task import config as chat_config
from tests.test_spot_the_bot_study import stb_study, write_bot_bot, write_human_human

HITS = 100
CHANCE_BOUND = 35
"""Most HITs (of 100) in which one value of a worker-visible feature may coincide with the QC slot.
Chance is 100/6 ≈ 17 (sd ≈ 3.7); a feature that gave the slot away would score 100."""


def _rank(value, values) -> int:
    return sorted(values).index(value)


def _auc(positives: list[float], negatives: list[float]) -> float:
    """How often a positive scores above a negative (ties count half): 0.5 is no information."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def test_no_worker_visible_id_or_position_predicts_the_qc_slot_over_100_hits(tmp_path, one_database_url):
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, chat_config(one_database_url, hits=HITS), None, secret)
        s.get(Study, ctx.study_id).status = "running"
        s.execute(update(Hit).where(Hit.study_id == ctx.study_id).values(status="posted"))
        hit_ids = list(s.scalars(select(Hit.id).where(Hit.study_id == ctx.study_id).order_by(Hit.index)))
        units = {u.public_key: u for u in s.scalars(select(Unit).where(Unit.study_id == ctx.study_id))}
    assert len(hit_ids) == HITS
    by_key_rank, by_listed, by_position, by_id_rank = Counter(), Counter(), Counter(), Counter()
    with serving(one_database_url, secret, tmp_path / "web.log") as base:
        for n, hit_id in enumerate(hit_ids):
            http = requests.Session()
            page = http.get(
                f"{base}/s/chat-test/hit/{hit_id}",
                params={"workerId": f"W{n:03d}", "assignmentId": f"A{n:03d}", "hitId": "h"},
            )
            assert page.status_code == 200, page.text[:300]
            task = page.url.split("?")[0]
            assert http.post(task + "consent").status_code == 200
            state = http.get(task + "state").json()
            keys = [v["unit_id"] for v in state["units"]]
            # Every id shown is an opaque key of this HIT's units: no row id, no number in order.
            assert all(isinstance(k, str) and re.fullmatch(r"[0-9a-f]{16}", k) for k in keys), keys
            qc = [k for k in keys if units[k].payload["is_control"]]
            assert len(qc) == 1
            qc_view = next(v for v in state["units"] if v["unit_id"] == qc[0])
            by_key_rank[_rank(qc[0], keys)] += 1
            by_listed[keys.index(qc[0])] += 1
            by_position[qc_view["position"]] += 1
            by_id_rank[_rank(units[qc[0]].id, [units[k].id for k in keys])] += 1
            if n < 5:  # the chat URLs take the same keys, and name the slot by it and nothing else
                chat = http.get(f"{task}chat/{qc[0]}").json()
                assert chat["unit_id"] == chat["conversation_id"] == qc[0]
                assert http.get(f"{task}chat/{units[qc[0]].id}").status_code == 400  # a row id names nothing
    for name, counts in (("key order", by_key_rank), ("listed order", by_listed), ("position", by_position)):
        assert max(counts.values()) <= CHANCE_BOUND, f"the QC slot's {name} predicts it: {dict(counts)}"
    # The same check on the row ids finds the design they carry: the detector can fail.
    assert max(by_id_rank.values()) > CHANCE_BOUND


def test_no_worker_visible_id_or_position_predicts_human_human_material(tmp_path, one_database_url):
    path = stb_study(tmp_path, one_database_url, human_count=20)
    write_bot_bot(tmp_path / "bot_bot.jsonl", per_pair=10)
    write_human_human(tmp_path / "human.jsonl", count=20)
    data = yaml.safe_load(path.read_text())
    data["schedule"].update(wave_size=100, max_concurrent=100)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_study(path)
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, path, secret)
        s.get(Study, ctx.study_id).status = "running"
        s.execute(update(Hit).where(Hit.study_id == ctx.study_id).values(status="posted"))
        hit_ids = list(s.scalars(select(Hit.id).where(Hit.study_id == ctx.study_id).order_by(Hit.index)))
        units = {u.public_key: u for u in s.scalars(select(Unit).where(Unit.study_id == ctx.study_id))}
    scores: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in ("key", "listed", "position", "id")}
    with serving(one_database_url, secret, tmp_path / "web.log") as base:
        for n, hit_id in enumerate(hit_ids):
            http = requests.Session()
            page = http.get(
                f"{base}/s/stb-demo/hit/{hit_id}",
                params={"workerId": f"W{n:03d}", "assignmentId": f"A{n:03d}", "hitId": "h"},
            )
            assert page.status_code == 200, page.text[:300]
            task = page.url.split("?")[0]
            assert http.post(task + "consent").status_code == 200
            views = http.get(task + "state").json()["units"]
            keys = [v["unit_id"] for v in views]
            ids = [units[k].id for k in keys]
            for i, view in enumerate(views):
                unit = units[view["unit_id"]]
                human = 0 if unit.payload["kind"] == "human_human" else 1
                features = {
                    "key": _rank(view["unit_id"], keys) / len(keys),
                    "listed": i / len(keys),
                    "position": view["position"] / len(keys),
                    "id": _rank(unit.id, ids) / len(ids),
                }
                for name, value in features.items():
                    scores[name][human].append(value)
    assert len(hit_ids) >= 20 and all(len(p) >= 40 for p, _ in scores.values())
    for name in ("key", "listed", "position"):
        auc = _auc(*scores[name])
        assert 0.35 <= auc <= 0.65, f"the {name} of a segment predicts human–human material (AUC {auc:.2f})"
    assert _auc(*scores["id"]) > 0.9  # created last, the human–human segments' row ids would tell


def test_upgrading_gives_every_existing_unit_its_own_random_key(database_url):
    import datetime as dt

    from alembic import command
    from sqlalchemy import create_engine, text

    from hitkit.db.migrate import alembic_config, upgrade
    from hitkit.db.session import dispose_engines, normalise_url

    command.downgrade(alembic_config(database_url), "0002")
    dispose_engines()
    engine = create_engine(normalise_url(database_url))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO study (id, name, task_type, provider, status, config, budget, currency, seed, "
                "created_at) VALUES (1, 'old', 'pairwise', 'simulated', 'running', '{}', 5, 'USD', 0, :t)"
            ),
            {"t": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)},
        )
        for n in range(1, 6):
            conn.execute(
                text("INSERT INTO unit (id, study_id, key, payload, required_answers) VALUES (:n, 1, :k, '{}', 1)"),
                {"n": n, "k": f"u{n}"},
            )
    engine.dispose()
    upgrade(database_url)
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        keys = list(conn.execute(text("SELECT public_key FROM unit ORDER BY id")).scalars())
    engine.dispose()
    assert len(set(keys)) == 5 and all(re.fullmatch(r"[0-9a-f]{16}", k) for k in keys)
