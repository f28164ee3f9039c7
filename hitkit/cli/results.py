"""Commands that turn a study's work into results: export the tables, analyse them, write the report
(importing an archive from another platform is :mod:`hitkit.cli.archives`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hitkit.cli.app import FOLDER, duplicates_option, main, on_terminal
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=FOLDER, default=None, help="Folder for the tables (default: OUT/STUDY/export).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "parquet", "both"]),
    default="both",
    show_default=True,
    help="Table format(s); docs/COLUMNS.md documents every column.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def export(study_file: Path, out: Path | None, fmt: str, no_progress: bool) -> None:
    """Write the study's tidy tables (CSV and/or Parquet), conversations.jsonl and study.json."""
    from hitkit.db.session import session_scope
    from hitkit.progress import showing_progress
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched
    from hitkit.study.stored import StudyContext, resolve_secret
    from hitkit.tables.export import export_study

    config = load_study(study_file)
    require_launched(config, study_file)
    with session_scope(config.database_url) as session, showing_progress(not no_progress and on_terminal()):
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        for path in export_study(session, ctx, out or config.out_dir / "export", fmt):
            click.echo(f"wrote {path}")


def _export_seed(directory: Path) -> int:
    """The seed an export's ``study.json`` records (the study's), else 0."""
    info = directory / "study.json"
    try:
        return int(json.loads(info.read_text(encoding="utf-8")).get("seed") or 0) if info.is_file() else 0
    except (ValueError, TypeError, AttributeError):
        return 0


def _analysis_option(name: str) -> str:
    """The :attr:`~hitkit.protocols.base.Protocol.analysis_options` entry a ``hitkit analyze`` option belongs to."""
    return "trueskill" if name.startswith("trueskill_") or name == "draw_probability" else name


@main.command()
@click.argument("task", type=click.Choice(list(PROTOCOLS)))
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder for the results.")
@click.option(
    "--study",
    "study_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The study file the tables come from: its settings apply (live-chat criteria, Spot The Bot "
    "spot_the_bot.trueskill, the seed); the options below override them.",
)
@click.option("--seed", type=int, default=None, help="Seed of every resampling (default: the study's, else 0).")
@click.option(
    "--replicate",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="live_chat: a second run's tables; adds run-to-run correlations (replication.csv).",
)
@click.option(
    "--stability",
    is_flag=True,
    help="spot_the_bot: add the ranking stability over 3-45 conversations per pair, "
    "1000 subsamples each, and without each system (stability.csv, "
    "stability.png; ~5 minutes per variant for 6 pairs of 45 conversations).",
)
@click.option(
    "--correction",
    type=click.Choice(["bonferroni", "holm", "none"]),
    default="bonferroni",
    show_default=True,
    help="Multiple-comparison correction of every table of p-values (p_adjusted).",
)
@duplicates_option(
    "Repeated annotations/ratings/votes: keep the first or last, drop all "
    "copies, or stop with an error. The count is reported either way."
)
@click.option(
    "--cluster",
    default=None,
    help="Unit a clustered bootstrap resamples (and, spot_the_bot, the robust log-rank/Cox "
    "variances cluster on): spot_the_bot conversation (default) | worker | annotation "
    "(none); live_chat worker (default) | conversation | rating; pairwise worker (default) "
    "| item | vote; arena worker (default) | battle.",
)
@click.option(
    "--n-boot",
    type=click.IntRange(min=1),
    default=None,
    help="Bootstrap resamples of every interval and rank range (default 1000; at least 1: "
    "with none there would be no interval at all).",
)
@click.option(
    "--unit",
    type=click.Choice(sorted({u for p in PROTOCOLS.values() for u in p.significance_units})),
    default=None,
    help="The significance tests' unit. live_chat, rating: worker (default: clustered by worker, valid "
    "when workers differ) | rating (Ji et al.'s per-rating Mann-Whitney, to reproduce the paper) | "
    "conversation (Mann-Whitney on conversation means); pairwise: worker (default) | vote "
    "(ChatEval's sign test per vote).",
)
@click.option(
    "--resample",
    type=click.Choice(["game", "conversation", "worker"]),
    default=None,
    help="spot_the_bot: unit the ranking bootstrap resamples (default game, as Dušek et al.).",
)
@click.option(
    "--rank-by",
    type=click.Choice(["mu", "conservative"]),
    default=None,
    help="spot_the_bot: rank by TrueSkill mu (default) or mu - 3 sigma.",
)
@click.option("--trueskill-mu", type=float, default=None, help="spot_the_bot: TrueSkill prior mean (default 25).")
@click.option(
    "--trueskill-sigma", type=float, default=None, help="spot_the_bot: TrueSkill prior sigma (default mu / 3)."
)
@click.option(
    "--trueskill-beta",
    type=float,
    default=None,
    help="spot_the_bot: TrueSkill performance spread beta (default sigma / 2).",
)
@click.option(
    "--trueskill-tau",
    type=float,
    default=None,
    help="spot_the_bot: TrueSkill dynamics tau (default 0, as the original Spot The Bot code; "
    "the trueskill package's default is 25/300).",
)
@click.option(
    "--draw-probability",
    default=None,
    help="spot_the_bot: TrueSkill draw probability, a number in [0, 1) or 'observed' (default: "
    "the observed tie rate of the games).",
)
@click.option(
    "--ties",
    type=click.Choice(["half", "davidson"]),
    default=None,
    help="arena: a tie as half a win (default, FastChat's convention) or Davidson's tie model.",
)
@click.option(
    "--include-leaks", is_flag=True, help="arena: count battles whose reply named a model or vendor in the leaderboard."
)
@click.option(
    "--inverse-sampling",
    is_flag=True,
    help="arena: weigh battles by 1 / how often their pair was sampled in the Bradley–Terry fit "
    "(also arena.inverse_sampling in the study file).",
)
@click.option(
    "--add",
    "add",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="arena: more battles on the same scale (an export folder or a FastChat battle file); repeatable.",
)
@click.option(
    "--judge-labels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="LLM-judge labels from a file (CSV or JSON Lines), one or several judges, analysed as hitkit's own "
    "judge's instead of the folder's judge.csv. Every task: unit, judge, label, optional confidence and "
    "human_probability (inverse-probability weights). pairwise: unit = item_id, label a/b/tie or [0, 1], "
    "system_a, system_b (needed where an item holds several pairs); arena: unit = battle_id, the same labels; live_chat: unit = "
    "conversation_id, criterion, label 0-100, optional system, worker_id (for conversations nobody rated); "
    "rating: unit = item_id, system, criterion, label 0-100; spot_the_bot: unit = conversation_id, "
    "segment_exchanges, speaker (A/B), label human/unsure/bot, optional system, study. docs/COLUMNS.md.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: files, summary, ranking.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def analyze(
    task: str,
    directory: Path,
    out: Path,
    study_file: Path | None,
    seed: int | None,
    replicate: Path | None,
    stability: bool,
    correction: str,
    duplicates: str,
    cluster: str | None,
    n_boot: int | None,
    unit: str | None,
    resample: str | None,
    rank_by: str | None,
    trueskill_mu: float | None,
    trueskill_sigma: float | None,
    trueskill_beta: float | None,
    trueskill_tau: float | None,
    draw_probability: str | None,
    ties: str | None,
    include_leaks: bool,
    inverse_sampling: bool,
    add: tuple[Path, ...],
    judge_labels: Path | None,
    as_json: bool,
    no_progress: bool,
) -> None:
    """Analyse exported tables in DIRECTORY (CSV, or Parquet where there is no CSV) into OUT.

    DIRECTORY may be a file where the task's analysis reads one (arena: FastChat clean-battle JSON).

    Every setting used is recorded in OUT/summary.json; warnings about the data (repeated rows,
    implausible times, a dominant worker ...) are printed and kept there under "warnings".
    """
    from hitkit.progress import showing_progress
    from hitkit.report.analyze import run_analysis

    config = None
    if study_file is not None:
        from hitkit.study.loading import load_study

        config = load_study(study_file)
        if config.task != task:
            raise HitkitError(
                f"{study_file} is a {config.task} study; run `hitkit analyze {config.task} …` "
                "or give this task's study file"
            )
    if seed is None:  # the study's seed, so that analyze reproduces the launch's and the report's numbers
        seed = config.seed if config is not None else _export_seed(directory)
    proto = PROTOCOLS[task]
    own = {
        "replicate": replicate,
        "stability": stability or None,
        "unit": unit,
        "resample": resample,
        "rank_by": rank_by,
        "trueskill_mu": trueskill_mu,
        "trueskill_sigma": trueskill_sigma,
        "trueskill_beta": trueskill_beta,
        "trueskill_tau": trueskill_tau,
        "draw_probability": draw_probability,
        "ties": ties,
        "include_leaks": include_leaks or None,
        "inverse_sampling": inverse_sampling or None,
        "add": list(add) or None,
        "judge_labels": judge_labels,
    }
    given = {name: value for name, value in own.items() if value is not None}
    foreign = [name for name in given if _analysis_option(name) not in proto.analysis_options]
    if foreign:
        takers = [p.name for p in PROTOCOLS.values() if _analysis_option(foreign[0]) in p.analysis_options]
        raise HitkitError(
            f"--{foreign[0].replace('_', '-')} applies to `analyze {' / '.join(takers)}` only, not to {task}"
        )
    options: dict = {
        "correction": correction,
        "duplicates": duplicates,
        "cluster": cluster,
        "n_boot": n_boot,
        "unit": unit,
        "judge_labels": judge_labels,
    }
    analysis = proto.module("analysis")
    if hasattr(analysis, "cli_options"):
        options.update(analysis.cli_options(config, given))
    from hitkit.tables.loading import check_task_folder

    if directory.is_file() and not getattr(analysis, "READS_FILES", False):
        raise HitkitError(f"{directory} is a file; `hitkit analyze {task}` reads a folder of exported tables")
    if directory.is_dir():
        check_task_folder(task, directory)
    with showing_progress(not no_progress and not as_json and on_terminal()):
        import warnings

        from hitkit.analysis.inference import DuplicateRowsWarning

        try:
            with warnings.catch_warnings():
                # Counted in the summary's warnings and printed below, once.
                warnings.simplefilter("ignore", DuplicateRowsWarning)
                result = run_analysis(
                    task,
                    directory,
                    seed=seed,
                    config=config,
                    replicate_dir=replicate,
                    stability=stability,
                    options=options,
                )
        except ValueError as exc:  # an option the analysis refused
            raise HitkitError(str(exc)) from None
        written = result.write(out)
    if not as_json:  # with --json they are in the summary's "warnings"
        for line in result.summary.get("warnings", []):
            click.echo(f"warning: {line}", err=True)
    ranking = next((result.tables[n] for n in ("ranking", "systems", "leaderboard") if n in result.tables), None)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "task": task,
                    "files": [str(p) for p in written],
                    "summary": result.summary,
                    "ranking": None if ranking is None else json.loads(ranking.to_json(orient="records")),
                },
                indent=2,
                default=str,
            )
        )
        return
    for path in written:
        click.echo(f"wrote {path}")
    if "passed" in result.summary:  # the analysis applied a per-worker quality control
        s = result.summary
        click.echo(f"{s.get('passed')} of {s.get('workers')} workers passed quality control")
    elif "qc_judged" in result.summary:  # the arena: every worker passed, failed or not judged
        s = result.summary
        click.echo(
            f"QC: {s['qc_failed']} of {s['qc_judged']} judged workers failed"
            + (f"; {s['qc_not_judged']} not judged (too few votes to tell)" if s.get("qc_not_judged") else "")
            + " (qc.csv says who and why)"
        )
    if ranking is not None:
        # Live chat's and rating's n counts criterion ratings, not conversations or workers: say so.
        from hitkit.analysis.base import console_table

        counts = {"n": "n (criterion ratings)"} if ranking is result.tables.get("systems") else None
        click.echo(console_table(ranking, counts))


@main.command()
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=FOLDER,
    default=None,
    help="Folder for report.html, report.md and figures/ (default: OUT/STUDY/report).",
)
@click.option("--seed", type=int, default=None, help="Seed of every resampling (default: the study's).")
@click.option("--stability", is_flag=True, help="spot_the_bot: add the ranking stability curve (minutes).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the files and methods paragraph.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def report(source: Path, out: Path | None, seed: int | None, stability: bool, as_json: bool, no_progress: bool) -> None:
    """Write an HTML report (one file) and a Markdown summary of SOURCE.

    SOURCE is a study file (exported and analysed afresh from its database), a run folder OUT/STUDY,
    an export folder (analysed here) or an analysis folder.
    """
    from hitkit.progress import showing_progress
    from hitkit.report import report as make_report
    from hitkit.report import summary_json

    if source.is_file():  # a study file: its database must hold the study
        from hitkit.study.loading import load_study
        from hitkit.study.served import require_launched

        require_launched(load_study(source), source)
    with showing_progress(not no_progress and not as_json and on_terminal()):
        files = make_report(source, out, seed=seed, stability=stability)
    if as_json:
        click.echo(summary_json(files))
        return
    click.echo(f"wrote {files.html}")
    click.echo(f"wrote {files.markdown} (figures in {files.markdown.parent / 'figures'})")
