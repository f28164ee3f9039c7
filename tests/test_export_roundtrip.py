"""Exports round-trip: a finished simulated study of each task type, exported by `hitkit export` as
CSV and as Parquet, re-analysed by `hitkit analyze`, gives the numbers computed from the database's
own tables (in memory, never written), and `hitkit.load` gives back the same tables."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import hitkit
from hitkit.cli import main
from hitkit.db.session import session_scope
from hitkit.study.stored import StudyContext, resolve_secret
from tests.studies import launch, pairwise_study

LIVE_QUALITY = {"anna": 0.9, "bert": 0.6, "cleo": 0.3}
TASK_TABLE = {"pairwise": "votes", "live_chat": "ratings", "spot_the_bot": "annotations"}


def live_chat_file(tmp_path, database_url, bot_url):
    """A small live-chat study: 3 systems + QC bot, 8 HITs of 4 chats, diligent workers and spammers."""
    data = {
        "study": "chat-report",
        "task": "live_chat",
        "seed": 5,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": database_url,
        "systems": [
            {"name": n, "url": bot_url, "model": n, "options": {"max_tokens": 12, "timeout_s": 10}}
            for n in [*LIVE_QUALITY, "qc"]
        ],
        "live_chat": {"hits": 8, "min_inputs": 2, "slots_per_hit": 4},
        "hit": {"title": "Chat with chatbots", "reward": "2.00"},
        "schedule": {"per_worker_cap": 1, "interval_s": 0.3, "wave_size": 8, "max_concurrent": 8},
        "simulated": {
            "workers": [{"profile": "diligent", "count": 6}, {"profile": "spammer", "count": 2}],
            "quality": {**LIVE_QUALITY, "qc": 0.05},
            "concurrency": 8,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def spot_the_bot_file(tmp_path, database_url):
    """A small Spot The Bot study: 3 bots, 2 conversations per pair, human–human material."""
    from tests.test_spot_the_bot_study import stb_study

    return stb_study(tmp_path, database_url)


def start_bots():
    """Degraded bots for every live-chat system (the simulated crowd rates by configured quality)."""
    from hitkit.bots.server import BotServer, DegradedSpec, build_backends

    return BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*LIVE_QUALITY, "qc"]], seed=1), port=0).start()


def run_study(task, tmp_path, database_url, bot_url=None):
    """Launch a small simulated study of ``task`` to the end; return (study file, run folder)."""
    if task == "pairwise":
        # One vote a comparison (9 HITs, not 27): the round trip is the subject, not the ranking's precision.
        path = pairwise_study(tmp_path, database_url, pairwise={"votes_per_prompt": 1})
    elif task == "live_chat":
        path = live_chat_file(tmp_path, database_url, bot_url)
    else:
        path = spot_the_bot_file(tmp_path, database_url)
    result = launch(path, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    assert result.crowd_errors == []
    return path, result.out_dir


@pytest.fixture(scope="module")
def bot_url():
    server = start_bots()
    yield server.url
    server.shutdown()


def database_tables(study_file, database_url):
    """The study's tables straight from the database, as the task builds them (no file in between)."""
    from hitkit.db.models import Study
    from hitkit.study.loading import load_study
    from hitkit.tables.export import assignments_table

    config = load_study(study_file)
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(database_url))
        study = session.get(Study, ctx.study_id)
        return {"assignments": assignments_table(session, study), **ctx.task.export(session, study)}


def numbers_from_database(task, tables, seed):
    """The headline numbers computed from the in-memory tables with the analysis' own functions."""
    assignments = tables["assignments"]
    counted = set(assignments.loc[assignments["status"].isin(["submitted", "approved"]), "assignment_id"])
    if task == "pairwise":
        from hitkit.protocols.pairwise.analysis import pair_table
        from hitkit.protocols.pairwise.bradley_terry import bradley_terry

        votes = tables["votes"][tables["votes"]["assignment_id"].isin(counted)]
        return {
            "pairs": pair_table(votes),
            "ranking": bradley_terry(votes, n_boot=1000, seed=seed, resample="worker"),
        }
    if task == "live_chat":
        from hitkit.protocols.live_chat import quality as lc
        from hitkit.protocols.live_chat.scores import system_scores

        ratings = tables["ratings"][tables["ratings"]["assignment_id"].isin(counted)].copy()
        ratings["is_control"] = ratings["is_control"].astype(bool)
        ratings["score"] = ratings["score"].astype(float)
        z = lc.standardise_per_worker(lc.reverse_negative(ratings))
        qc = lc.wilcoxon_qc(z)
        workers = lc.worker_table(assignments[assignments["assignment_id"].isin(counted)], z, qc)
        return {"systems": system_scores(lc.passed_ratings(z, workers))}
    from hitkit.protocols.spot_the_bot.win_rates import win_rates

    annotations = tables["annotations"][tables["annotations"]["assignment_id"].isin(counted)].copy()
    annotations["elapsed_s"] = annotations["elapsed_s"].astype(float)
    return {"win_rates": win_rates(annotations, seed=seed)}


def assert_same(a: pd.DataFrame, b: pd.DataFrame, sort: list[str]):
    a = a.sort_values(sort, ignore_index=True)
    b = b.sort_values(sort, ignore_index=True)
    assert list(a.columns) == list(b.columns)
    for column in a.columns:
        if pd.api.types.is_numeric_dtype(a[column]) and pd.api.types.is_numeric_dtype(b[column]):
            np.testing.assert_allclose(
                a[column].to_numpy(float),
                b[column].to_numpy(float),
                rtol=1e-9,
                atol=1e-12,
                equal_nan=True,
                err_msg=column,
            )
        else:
            assert a[column].astype(str).tolist() == b[column].astype(str).tolist(), column


KEYS = {
    "pairs": ["system_a", "system_b"],
    "ranking": ["system"],
    "systems": ["system"],
    "win_rates": ["system_a", "system_b"],
}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["pairwise", "live_chat", "spot_the_bot"])
def test_analyze_on_exported_csv_and_parquet_reproduces_the_database_numbers(task, tmp_path, database_url, request):
    bot = request.getfixturevalue("bot_url") if task == "live_chat" else None
    study_file, run_dir = run_study(task, tmp_path, database_url, bot)
    runner = CliRunner()

    export = tmp_path / "exported"
    run = runner.invoke(main, ["export", str(study_file), "--out", str(export), "--no-progress"])
    assert run.exit_code == 0, run.output
    table = TASK_TABLE[task]
    for name in ("assignments", table, "feedback", "payments"):
        assert (export / f"{name}.csv").is_file() and (export / f"{name}.parquet").is_file()
    info = json.loads((export / "study.json").read_text())
    assert info["task"] == task and info["export_version"] == 3
    seed = int(info["seed"])
    expected = numbers_from_database(task, database_tables(study_file, database_url), seed)

    # Parquet and CSV hold the same table.
    csv = pd.read_csv(export / f"{table}.csv", dtype=str, keep_default_na=False)
    parquet = pd.read_parquet(export / f"{table}.parquet")
    assert list(parquet.columns) == list(csv.columns) and len(parquet) == len(csv) > 0

    parquet_only = tmp_path / "parquet-only"
    parquet_only.mkdir()
    for path in export.glob("*.parquet"):
        shutil.copy(path, parquet_only / path.name)

    results = {}
    for label, folder in (("csv", export), ("parquet", parquet_only)):
        out = tmp_path / f"analysis-{label}"
        run = runner.invoke(
            main, ["analyze", task, str(folder), "--out", str(out), "--seed", str(seed), "--json", "--no-progress"]
        )
        assert run.exit_code == 0, run.output
        payload = json.loads(run.output)
        assert payload["task"] == task and payload["ranking"]
        results[label] = out
    for name, frame in expected.items():
        for _label, out in results.items():
            assert_same(frame, pd.read_csv(out / f"{name}.csv"), KEYS[name])
    # Every analysis table is identical from CSV and from Parquet, and equal to launch's own analysis.
    for path in sorted(results["csv"].glob("*.csv")):
        from_csv = pd.read_csv(path)
        assert_same(from_csv, pd.read_csv(results["parquet"] / path.name), list(from_csv.columns[:1]))
        assert_same(from_csv, pd.read_csv(run_dir / "analysis" / path.name), list(from_csv.columns[:1]))

    # hitkit.load gives back the exported tables, from the export folder or the study file.
    data = hitkit.load(export)
    assert data.task == task
    assert len(data[table]) == len(csv) and len(data.conversations) > 0
    from_study = hitkit.load(study_file)
    assert sorted(from_study.tables) == sorted(data.tables)
    assert from_study.analysis and "summary" not in from_study.tables
