"""Study files for tests: the example A/B study, pointed at a test database, with overrides."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "pairwise.yaml"


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def pairwise_study(tmp_path: Path, database_url: str, **changes) -> Path:
    """Write the example pairwise study into tmp_path, on ``database_url``, with ``changes`` merged in."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["pairwise"]["responses"] = str(REPO / "examples" / "data" / "ab_responses.jsonl")
    data.update(out=str(tmp_path / "runs"), database=database_url)
    data["simulated"]["seconds_per_answer"] = 0
    # The example crowd has spammers, and tests of a provider's mechanics expect every submission paid;
    # the QC outcome policy (hold by default on real providers) has its own tests in test_new_user.py.
    data["schedule"]["qc_failures"] = "pay"
    data = merge(data, changes)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def launch(config_path, **options):
    """:func:`hitkit.running.launch.launch` with the embedded web server, as ``hitkit launch`` runs it."""
    from hitkit.running.launch import launch as run
    from server.embedded import WebServer

    return run(config_path, web=WebServer.serve, **options)


def served(study_file, database_url: str):
    """A study created from ``study_file``, running, its first wave posted and its pages served on
    loopback: a generator of (pages URL, config, secret) that stops the server when closed."""
    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.running.scheduler import tick
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    config = load_study(study_file)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, Path(study_file), secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    tick(database_url, config.study, web.url)
    try:
        yield web.url, config, secret
    finally:
        web.stop()
