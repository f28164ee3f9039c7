"""Engines and sessions for SQLite (the embedded default, in WAL mode) and PostgreSQL."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import CursorResult, Engine, Result, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from hitkit import timing

_engines: dict[str, Engine] = {}
_factories: dict[str, sessionmaker[Session]] = {}
_lock = threading.Lock()


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and use the psycopg 3 driver for them."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def create_db_engine(url: str) -> Engine:
    """A new engine; SQLite gets WAL, a busy timeout and write transactions that lock up front."""
    url = normalise_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:" and not parsed.database.startswith("file:"):
            _create_private(Path(parsed.database))
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            # Let SQLAlchemy, not pysqlite, decide when transactions begin (see "begin" below).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            # BEGIN IMMEDIATE takes the write lock at the start, so two requests racing for the last
            # place on a HIT serialise instead of failing half-way with "database is locked".
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    # A modest pool per process: PostgreSQL's default max_connections (100) is shared by every web
    # worker, the scheduler and the CLI; raise HITKIT_DB_POOL_SIZE where the server allows more.
    # LIFO keeps the few connections a process needs warm, and only those left idle are pinged.
    size = int(os.environ.get("HITKIT_DB_POOL_SIZE", "5"))
    engine = create_engine(url, pool_size=size, max_overflow=2 * size, pool_timeout=60, pool_use_lifo=True)
    _ping_when_idle(engine, float(os.environ.get("HITKIT_DB_PING_AFTER_S", "0.25")))
    return engine


DB_FILE_MODE = 0o600
"""A SQLite database holds worker ids, answers, payments (and the embedded default's secret): owner only."""


def _create_private(path: Path) -> None:
    """Create the SQLite file ``path`` readable by its owner only, before SQLite opens it.

    SQLite gives the ``-wal`` and ``-shm`` files it makes the main file's permissions, so those are
    0600 too. The file is created here (O_EXCL, so two processes starting together are both fine)
    rather than by SQLite, which would use the process umask (typically 0644).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE))
    except FileExistsError:
        pass


def _ping_when_idle(engine: Engine, after_s: float) -> None:
    """Survive a PostgreSQL restart: a pooled connection idle for ``after_s`` is pinged before use.

    A dead one (the server restarted) is replaced at once, so the request never sees it. This is
    SQLAlchemy's ``pool_pre_ping`` for idle connections only: pinging every checkout cost two round
    trips a chat turn under load, while a busy connection that died is caught anyway, on its first
    statement, as a disconnect that makes SQLAlchemy discard the whole pool (that one request
    answers 503, and the page may send it again).
    """

    @event.listens_for(engine, "connect")
    def _connected(_dbapi_conn, record):
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn, record):
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn, record, _proxy):
        if time.monotonic() - record.info.get("idle_since", 0.0) < after_s:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # any failure: let the pool replace the connection and try again
            raise DisconnectionError(f"a pooled connection was dead ({type(exc).__name__})") from exc


def get_engine(url: str) -> Engine:
    """The process-wide engine for ``url`` (one pool per database)."""
    url = normalise_url(url)
    with _lock:
        if url not in _engines:
            _engines[url] = create_db_engine(url)
        return _engines[url]


def dispose_engines() -> None:
    """Close every pooled connection (at shutdown, and in tests)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _factories.clear()


def session_factory(url: str) -> sessionmaker[Session]:
    """The process-wide sessionmaker bound to the shared engine of ``url``.

    Made once per database: each ``sessionmaker`` defines a new Session subclass with its own
    event dispatch. Making one per request cost every request that work, and left the classes as
    cyclic garbage for the collector to pause the process over.
    """
    engine = get_engine(url)
    url = normalise_url(url)
    with _lock:
        factory = _factories.get(url)
        if factory is None or factory.kw["bind"] is not engine:
            factory = _factories[url] = sessionmaker(engine, expire_on_commit=False)
        return factory


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    session = session_factory(url)()
    try:
        yield session
        with timing.phase("commit"):
            session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def rowcount(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE without RETURNING changed. ``Session.execute`` returns a
    ``CursorResult`` for those (SQLAlchemy's ORM docs) but is typed to return any ``Result``, so this
    narrows it, with a TypeError should a statement ever come back without a cursor."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"expected the CursorResult of an UPDATE or DELETE, got a {type(result).__name__}")
    return result.rowcount
