"""Schema migrations keep what a database already holds, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import create_engine, inspect, text

from hitkit.db.migrate import current, upgrade
from hitkit.db.session import dispose_engines, normalise_url


def test_upgrading_from_the_first_revision_keeps_every_row(tmp_path, database_url):
    # The fixture's database is at head; go down to 0001 as an older install would be.
    from alembic import command

    from hitkit.db.migrate import alembic_config

    command.downgrade(alembic_config(database_url), "0001")
    dispose_engines()
    engine = create_engine(normalise_url(database_url))
    now = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO study (id, name, task_type, provider, status, config, budget, currency, seed, "
                "created_at) VALUES (1, 'old', 'pairwise', 'simulated', 'running', '{}', 5, 'USD', 0, :t)"
            ),
            {"t": now},
        )
        conn.execute(
            text(
                "INSERT INTO hit (id, study_id, \"index\", status, max_assignments, reward, lifetime_s) "
                "VALUES (1, 1, 0, 'posted', 3, 0.5, 60)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO worker (id, provider, external_id, blocked, created_at) "
                "VALUES (1, 'simulated', 'w1', false, :t)"
            ),
            {"t": now},
        )
        conn.execute(
            text(
                "INSERT INTO assignment (id, hit_id, worker_id, status, token_nonce, layout, accepted_at) "
                "VALUES (1, 1, 1, 'submitted', 'n', '{}', :t)"
            ),
            {"t": now},
        )
    engine.dispose()
    upgrade(database_url)
    from alembic.script import ScriptDirectory

    assert current(database_url) == ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        assert "feedback" in {c["name"] for c in inspect(conn).get_columns("assignment")}
        assert inspect(conn).has_table("setting")
        row = conn.execute(text("SELECT status, token_nonce, feedback FROM assignment WHERE id = 1")).one()
        assert tuple(row) == ("submitted", "n", None)
        assert conn.execute(text("SELECT name FROM study")).scalar_one() == "old"
        # 0003: the old simulated study's submitted work stays counted, and the study gets its random uid.
        assert conn.execute(text("SELECT confirmed_at FROM assignment WHERE id = 1")).scalar_one() is not None
        assert len(conn.execute(text("SELECT uid FROM study")).scalar_one()) == 32
    engine.dispose()
