"""`kill -9` of the launch process mid-study, then `launch --resume`: nothing lost, nothing doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pandas as pd
from sqlalchemy import func, select

from hitkit.db.models import Response, Study, Unit
from hitkit.db.session import session_scope
from tests.studies import REPO, pairwise_study

EXAMPLE_RESPONSES = REPO / "examples" / "data" / "ab_responses.jsonl"


def test_killed_launch_resumes_to_completion_without_lost_or_duplicated_votes(tmp_path, database_url):
    # Twelve of the example's 30 prompts: 36 comparisons, 4 HITs of 3 places; killed after 40 of 120 answers.
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(EXAMPLE_RESPONSES.read_text().splitlines(keepends=True)[:12]))
    study_file = pairwise_study(
        tmp_path,
        database_url,
        pairwise={"responses": str(responses)},
        simulated={"ack_log": True, "seconds_per_answer": 0.03},
    )
    acks_path = tmp_path / "runs" / "ab-demo" / "acks.jsonl"
    cmd = [sys.executable, "-m", "hitkit.cli", "launch", str(study_file), "--yes", "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if acks_path.exists() and len(acks_path.read_text().splitlines()) >= 40:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    acked_before = [json.loads(line) for line in acks_path.read_text().splitlines()]
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "running"

    resumed = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr

    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        keys = dict(s.execute(select(Unit.id, Unit.public_key)).all())  # workers (and the acks) name units by key
        stored = {
            (r.assignment.provider_assignment_id, keys[r.unit_id]): r.value
            for r in s.scalars(select(Response).where(Response.source == "worker"))
        }
        for ack in acked_before:  # acknowledged before the kill, still there, unchanged
            assert stored[(ack["assignment"], ack["unit_id"])] == ack["value"]
        per_unit = Counter(r.unit_id for r in s.scalars(select(Response)))
        required = dict(s.execute(select(Unit.id, Unit.required_answers)).all())
        assert per_unit == Counter(required)
        n_responses = s.scalar(select(func.count()).select_from(Response))
    votes = pd.read_csv(tmp_path / "runs" / "ab-demo" / "export" / "votes.csv")
    assert len(votes) == n_responses
    assert not votes.duplicated(["assignment_id", "item_id", "system_a", "system_b"]).any()
