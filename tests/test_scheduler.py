"""The scheduler's tick against the database: what it posts, and what it does when a provider refuses."""

from __future__ import annotations

from sqlalchemy import func, select

from hitkit.db.models import Event, Hit, Study
from hitkit.db.session import session_scope
from hitkit.errors import BudgetError
from hitkit.providers.simulated import SimulatedProvider
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.studies import pairwise_study


def test_a_provider_refusing_a_post_stops_the_wave_without_losing_what_was_posted(tmp_path, database_url, monkeypatch):
    config = load_study(pairwise_study(tmp_path, database_url, schedule={"wave_size": 5, "max_concurrent": 10}))
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, resolve_secret(database_url))
        s.get(Study, ctx.study_id).status = "running"
    original, calls = SimulatedProvider.post_hit, []

    def low_balance(self, hit_key, *args):
        calls.append(hit_key)
        if len(calls) == 3:
            raise BudgetError("account balance 1.00 cannot cover this HIT (1.50)")
        return original(self, hit_key, *args)

    monkeypatch.setattr(SimulatedProvider, "post_hit", low_balance)
    report = tick(database_url, config.study, "http://127.0.0.1:9")
    assert report.posted == 2
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Hit).where(Hit.status == "posted")) == 2
        refused = s.scalar(select(Event).where(Event.kind == "provider_refused_post"))
        assert "balance" in refused.data["reason"]
    monkeypatch.setattr(SimulatedProvider, "post_hit", original)
    assert tick(database_url, config.study, "http://127.0.0.1:9").posted == 5  # the next tick carries on


def test_the_scheduler_starts_on_python_3_10_whose_datetime_has_no_UTC(tmp_path, database_url, monkeypatch):
    """hitkit supports Python 3.10 (requires-python), where ``datetime.UTC`` does not exist yet: making the
    scheduler and adding a study's tick once used it, so `hitkit launch` and `hitkit scheduler` failed there."""
    import datetime

    from hitkit.running.scheduler import job_id, make_scheduler, schedule_study

    config = load_study(pairwise_study(tmp_path, database_url))
    with session_scope(database_url) as s:
        create_study(s, config, None, resolve_secret(database_url))
    monkeypatch.delattr(datetime, "UTC")  # as on Python 3.10
    scheduler = make_scheduler(database_url)
    schedule_study(scheduler, database_url, config.study, "http://127.0.0.1:9", 60.0)
    scheduler.start(paused=True)
    try:
        assert scheduler.get_job(job_id(config.study)) is not None
    finally:
        scheduler.shutdown(wait=False)
