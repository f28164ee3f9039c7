"""A running ``hitkit launch`` obeys ``hitkit stop`` and ``hitkit pause`` given from another terminal."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.running.control import pause_study, resume_study, stop_study
from hitkit.running.monitor import progress
from tests.studies import launch, pairwise_study

pytestmark = pytest.mark.slow

TICK_S = 0.5


def _slow_study(tmp_path, database_url):
    # Slow readers, so the study is still running when the coordinator acts.
    return pairwise_study(
        tmp_path,
        database_url,
        simulated={"seconds_per_answer": 0.4},
        schedule={"interval_s": TICK_S},
    )


def _started(database_url: str, study_file, lines: list[str]):
    result: dict = {}

    def run():
        try:
            result["value"] = launch(
                study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=240, analyse=False
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with session_scope(database_url) as s:
                study_id = s.scalar(select(Study.id))
            if study_id is not None and progress(database_url, study_id)[0] >= 3:
                return thread, result
        except OperationalError:  # the launch is creating the study in one long write
            pass
        time.sleep(0.3)
    raise AssertionError(f"the study did not start collecting answers: {lines}")


def test_hitkit_stop_ends_a_running_launch_within_two_ticks_and_exports_what_is_in(tmp_path, database_url):
    study_file = _slow_study(tmp_path, database_url)
    lines: list[str] = []
    thread, result = _started(database_url, study_file, lines)
    stop_study(database_url, _name(study_file))
    asked = time.monotonic()
    thread.join(timeout=60)
    assert not thread.is_alive() and "error" not in result, result
    # Seen within two ticks; shutting the crowd and the web server down takes its own few seconds.
    assert any("was stopped (`hitkit stop`)" in line for line in lines), lines
    launch_result = result["value"]
    assert launch_result.status == "stopped"
    assert time.monotonic() - asked < 2 * TICK_S + 15
    assert (tmp_path / "runs").exists() and launch_result.exported
    with session_scope(database_url) as s:
        assert s.scalars(select(Study)).one().status == "stopped"


def test_hitkit_pause_makes_a_running_launch_wait_and_resume_carries_it_on(tmp_path, database_url):
    study_file = _slow_study(tmp_path, database_url)
    lines: list[str] = []
    thread, result = _started(database_url, study_file, lines)
    name = _name(study_file)
    pause_study(database_url, name)
    deadline = time.monotonic() + 2 * TICK_S + 5
    while time.monotonic() < deadline and not any("is paused" in line for line in lines):
        time.sleep(0.1)
    assert any("is paused (`hitkit pause`)" in line for line in lines), lines
    time.sleep(3 * TICK_S)
    assert thread.is_alive()  # waiting, not ended and not "ran out of workers"
    resume_study(database_url, name)
    thread.join(timeout=200)
    assert not thread.is_alive() and "error" not in result, result
    assert result["value"].status == "completed"


def _name(study_file) -> str:
    import yaml

    return yaml.safe_load(study_file.read_text())["study"]
