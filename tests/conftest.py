"""Shared fixtures: every database test runs twice, on SQLite and on a real PostgreSQL.

Each test gets a fresh, migrated database: a copy of a migrated SQLite template file, or a
PostgreSQL database cloned from a migrated template database (``CREATE DATABASE … TEMPLATE``).
PostgreSQL is found at HITKIT_TEST_PG (default: postgres@127.0.0.1:5432/test). Where it is absent
the PostgreSQL runs are skipped — unless HITKIT_REQUIRE_POSTGRES=1 (set by CI), which turns a
skip into a failure and fails the session if no PostgreSQL test ran.
"""

from __future__ import annotations

import os

# One compute thread per test process (torch's intra-op pool, OpenBLAS under numpy), set before either is
# imported; subprocesses the tests start inherit it. The suite runs three pytest-xdist workers on two cores,
# and a pool of one thread per core in each spins waiting for cores the other workers hold: the real-model
# test took 31 s of CPU (34 s) with torch's two threads and 18 s (20 s) with one, the tiny-model bot server
# tests 19 s (45 s) and 15 s (28 s). What the tests check does not depend on it. An explicit setting stays.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import re  # noqa: E402
import shutil  # noqa: E402
import uuid  # noqa: E402
from collections import defaultdict  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property tests check what holds, never how fast inputs come: a loaded machine (CI beside other jobs)
# must not fail them on Hypothesis's speed health checks or per-example deadlines.
settings.register_profile(
    "hitkit", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
settings.load_profile("hitkit")

PG_URL = os.environ.get("HITKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("HITKIT_REQUIRE_POSTGRES") == "1"
FAST = os.environ.get("HITKIT_FAST") == "1"
"""The fast tier (``ops/test.sh --fast``): SQLite only, and the tests listed in tests/slow_tests.txt,
the browser and the model tests deselected."""
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
    """The session's pool of databases cloned from a migrated PostgreSQL template, or the reason there is none."""
    if FAST:
        yield None, "the fast tier runs on SQLite only (ops/test.sh without --fast runs PostgreSQL too)"
        return
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
    pool = _PgPool(name)
    yield pool, None
    pool.close()
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


class _PgPool:
    """The tests' PostgreSQL databases, cloned from the template one test ahead and dropped behind the
    tests, in one background thread: a clone (~0.4 s) and a drop (0.2–1.5 s, more on a loaded machine)
    overlap the tests instead of adding to each of them. Each database commits without waiting for its
    WAL to reach the disk (``synchronous_commit = off``): what a test checks is the same (only a crash of
    the server itself could lose the last commits), without a disk flush in every request."""

    def __init__(self, template: str):
        self.template = template
        self.jobs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitkit-test-pg")
        self.ahead = self.jobs.submit(self._create)

    def _create(self) -> str:
        name = f"hitkit_t_{uuid.uuid4().hex[:10]}"
        with _pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        return name

    @staticmethod
    def _drop(name: str) -> None:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def take(self) -> str:
        """A fresh, migrated database of its own for one test (the next one is cloned meanwhile)."""
        name = self.ahead.result()
        self.ahead = self.jobs.submit(self._create)
        return name

    def give_back(self, name: str) -> None:
        self.jobs.submit(self._drop, name)

    def close(self) -> None:
        try:
            self.give_back(self.ahead.result())
        finally:
            self.jobs.shutdown(wait=True)


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
    pool, reason = pg_template
    if pool is None:
        if REQUIRE_PG:
            pytest.fail(f"HITKIT_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    yield from _pg_database(pool)


@pytest.fixture
def one_database_url(tmp_path, sqlite_template, pg_template):
    """One fresh, migrated database: PostgreSQL, the production store, where there is one (always under
    HITKIT_REQUIRE_POSTGRES=1), else SQLite. For the long end-to-end runs whose subject is a policy (a
    stopping rule, a simulated profile) rather than storage: running them on both stores doubled the
    suite's longest tests and checked nothing the other tests on both stores do not."""
    pool, reason = pg_template
    if pool is None:
        if REQUIRE_PG:
            pytest.fail(f"HITKIT_REQUIRE_POSTGRES=1 but {reason}")
        yield from _sqlite_url(tmp_path, sqlite_template)
        return
    yield from _pg_database(pool)


def _pg_database(pool: _PgPool):
    from hitkit.db.session import dispose_engines

    name = pool.take()
    _state["pg_ran"] += 1
    yield _pg_url(name)
    dispose_engines()
    pool.give_back(name)


def _slow_tests() -> dict[str, float]:
    """Test ids (without parameters) measured to take more than a few seconds, with those seconds:
    tests/slow_tests.txt, one a line, the seconds after a '#'. Regenerate it with ops/slow_tests.py from a
    run's durations."""
    path = Path(__file__).with_name("slow_tests.txt")
    if not path.exists():
        return {}
    out: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        test, _, note = line.partition("#")
        if test.strip():
            seconds = re.match(r"\s*([0-9.]+)", note)
            out[test.strip()] = float(seconds.group(1)) if seconds else 0.0
    return out


def pytest_collection_modifyitems(config, items):
    slow = _slow_tests()
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)
    # The modules that take longest start first (each module's tests stay together and in order, so its
    # module fixtures are made once a worker): a long module started last would run on alone at the end
    # of a parallel run while the other workers idle. Every worker sorts the same collection the same way.
    module_s: dict[str, float] = defaultdict(float)
    for test, seconds in slow.items():
        module_s[test.split("::")[0]] += seconds
    items[:] = sorted(items, key=lambda item: -module_s.get(item.nodeid.split("::")[0], 0.0))


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
