"""Shared fixtures: every database test runs twice, on SQLite and on a real PostgreSQL.

Each test gets a fresh, migrated database: a copy of a migrated SQLite template file, or a
PostgreSQL database cloned from a migrated template database (``CREATE DATABASE … TEMPLATE``).
PostgreSQL is found at HITKIT_TEST_PG (default: postgres@127.0.0.1:5432/test). Where it is absent
the PostgreSQL runs are skipped — unless HITKIT_REQUIRE_POSTGRES=1 (set by CI), which turns a
skip into a failure and fails the session if no PostgreSQL test ran.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

PG_URL = os.environ.get("HITKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("HITKIT_REQUIRE_POSTGRES") == "1"
REPO = Path(__file__).resolve().parents[1]
_state: dict = {"pg_ran": 0}


def _pg_admin():
    import psycopg

    from hitkit.db.session import normalise_url

    url = normalise_url(PG_URL).replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url, autocommit=True, connect_timeout=3)


def _pg_url(dbname: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(PG_URL).set(database=dbname).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_template():
    """A migrated PostgreSQL template database for the session, or the reason there is none."""
    try:
        conn = _pg_admin()
    except Exception as exc:  # noqa: BLE001 - any failure to connect means "no PostgreSQL here"
        yield None, f"PostgreSQL not reachable at {PG_URL}: {exc}"
        return
    from hitkit.db.migrate import upgrade
    from hitkit.db.session import dispose_engines

    name = f"hitkit_tpl_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    upgrade(_pg_url(name))
    dispose_engines()
    yield name, None
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    from hitkit.db.migrate import upgrade
    from hitkit.db.session import dispose_engines

    path = tmp_path_factory.mktemp("tpl") / "template.db"
    upgrade(f"sqlite:///{path}")
    dispose_engines()
    return path


def _sqlite_url(tmp_path, sqlite_template):
    from hitkit.db.session import dispose_engines

    path = tmp_path / "hitkit.db"
    shutil.copy(sqlite_template, path)
    yield f"sqlite:///{path}"
    dispose_engines()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request, tmp_path, sqlite_template, pg_template):
    """A fresh, migrated database URL: SQLite in tmp_path, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield from _sqlite_url(tmp_path, sqlite_template)
        return
    template, reason = pg_template
    if template is None:
        if REQUIRE_PG:
            pytest.fail(f"HITKIT_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    yield from _pg_database(template)


@pytest.fixture
def one_database_url(tmp_path, sqlite_template, pg_template):
    """One fresh, migrated database: PostgreSQL, the production store, where there is one (always under
    HITKIT_REQUIRE_POSTGRES=1), else SQLite. For the long end-to-end runs whose subject is a policy (a
    stopping rule, a simulated profile) rather than storage: running them on both stores doubled the
    suite's longest tests and checked nothing the other tests on both stores do not."""
    template, reason = pg_template
    if template is None:
        if REQUIRE_PG:
            pytest.fail(f"HITKIT_REQUIRE_POSTGRES=1 but {reason}")
        yield from _sqlite_url(tmp_path, sqlite_template)
        return
    yield from _pg_database(template)


def _pg_database(template: str):
    from hitkit.db.session import dispose_engines

    name = f"hitkit_t_{uuid.uuid4().hex[:10]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    _state["pg_ran"] += 1
    yield _pg_url(name)
    dispose_engines()
    with _pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pytest_sessionfinish(session, exitstatus):
    # CI must not go green on a run where PostgreSQL silently did not take part. Under pytest-xdist
    # each worker reports its counts to the controller (pytest_testnodedown), which decides.
    selected = sum(1 for i in session.items if i.get_closest_marker("postgres"))
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput.update(pg_ran=_state["pg_ran"], pg_selected=selected)
        return
    selected += _state.get("pg_selected", 0)
    if REQUIRE_PG and exitstatus == 0 and _state["pg_ran"] == 0 and selected:
        print("\nHITKIT_REQUIRE_POSTGRES=1 but no PostgreSQL test ran")
        session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: add up what each worker ran on PostgreSQL (see pytest_sessionfinish)."""
    output = getattr(node, "workeroutput", {})
    _state["pg_ran"] += output.get("pg_ran", 0)
    _state["pg_selected"] = _state.get("pg_selected", 0) + output.get("pg_selected", 0)


@pytest.fixture(autouse=True)
def _isolated_secret(monkeypatch):
    monkeypatch.setenv("HITKIT_SECRET", "test-secret-" + uuid.uuid4().hex)
    monkeypatch.delenv("HITKIT_DATABASE_URL", raising=False)


@pytest.fixture(autouse=True)
def _fresh_arrival_checks():
    """Each test starts with no cached arrival checks and full per-address budgets: one test's refused
    arrivals (all from 127.0.0.1) must not throttle the next test's."""
    from hitkit.worker.arrivals import CHECKS

    CHECKS.clear()
    yield
    CHECKS.clear()
