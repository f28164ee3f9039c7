"""Sessions and engines: one pool and one sessionmaker per database and process."""

from __future__ import annotations

from hitkit.db.session import dispose_engines, get_engine, session_factory, session_scope


def test_every_session_of_a_database_comes_from_one_sessionmaker(tmp_path):
    url = f"sqlite:///{tmp_path / 'one.db'}"
    first = session_factory(url)
    with session_scope(url) as a, session_scope(url) as b:
        # One Session class for every request, not a new subclass (and its event dispatch) each time.
        assert type(a) is type(b) is first.class_
    assert session_factory(url) is first
    assert first.kw["bind"] is get_engine(url)


def test_disposing_the_engines_gives_a_fresh_sessionmaker_on_a_fresh_engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'two.db'}"
    before = session_factory(url)
    dispose_engines()
    after = session_factory(url)
    assert after is not before
    assert after.kw["bind"] is get_engine(url) is not before.kw["bind"]
