"""Writing a report: from an analysis (and export) to ``report.html``, ``report.md`` and ``figures/``,
and from whatever the user points at (a study file, a run, export or analysis folder)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS
from hitkit.report.parts import ReportFiles, ReportInput, SectionSource
from hitkit.report.render import render_html, render_markdown
from hitkit.report.sections import build_sections, methods_paragraph


def write_report(
    inp: ReportInput, out_dir: str | Path, *, extra_sections: Iterable[SectionSource] = (), name: str = "report"
) -> ReportFiles:
    """Write ``NAME.html`` (self-contained), ``NAME.md`` and the figures (``figures/*.png``) into ``out_dir``."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    sections = build_sections(inp, extra_sections)
    methods = methods_paragraph(inp)
    figures, links = [], {}
    used: set[str] = set()
    for section in sections:
        for fig in section.figures:
            stem = f"{section.anchor}-{fig.name}" if fig.name in used else fig.name
            used.add(fig.name)
            fig.name = stem
            path = out / "figures" / f"{stem}.png"
            path.write_bytes(fig.png)
            figures.append(path)
            links[stem] = f"figures/{stem}.png"
    html_path = out / f"{name}.html"
    html_path.write_text(render_html(inp, sections, methods), encoding="utf-8")
    md_path = out / f"{name}.md"
    md_path.write_text(render_markdown(inp, sections, methods, links), encoding="utf-8")
    return ReportFiles(html_path, md_path, figures, methods=methods)


# --- from a study file or a folder --------------------------------------------------------------------


def _criteria_of(config) -> list[tuple[str, str, bool]] | None:
    """The study's rated criteria (name, polarity, qc), for a protocol whose report shows them."""
    if config is None:
        return None
    criteria_of = getattr(PROTOCOLS[config.task].module("report"), "criteria_of", None)
    return criteria_of(config) if criteria_of is not None else None


def input_from_result(task: str, result, export_dir: Path | None, *, source: str, config=None) -> ReportInput:
    """A ReportInput from an :class:`~hitkit.analysis.base.AnalysisResult` and (optionally) an export folder."""
    from hitkit.tables.loading import load

    export, info = {}, {}
    if export_dir is not None:
        data = load(export_dir)
        export, info = data.tables, data.info
    return ReportInput(
        task=task,
        tables=dict(result.tables),
        summary=dict(result.summary),
        export=export,
        info=info,
        source=source,
        criteria=_criteria_of(config),
    )


def report(
    path: str | Path,
    out: str | Path | None = None,
    *,
    seed: int | None = None,
    stability: bool = False,
    extra_sections: Iterable[SectionSource] = (),
    name: str = "report",
) -> ReportFiles:
    """Write the report of ``path``: a study file (exported and analysed afresh from its database), a run
    folder, an export folder (analysed here) or an analysis folder (its tables as they are).

    ``out`` defaults to ``OUT/STUDY/report`` (the run folder's ``report``); ``seed`` overrides the study's
    seed; ``stability`` adds Spot The Bot's ranking stability (minutes).
    """
    from hitkit.report.analyze import run_analysis
    from hitkit.tables.loading import export_from_database, load, locate

    path = Path(path)
    config = None
    export_dir: Path | None
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from hitkit.study.loading import load_study

        config = load_study(path)
        export_dir = export_from_database(path)
        analysis_dir, run_dir, source = None, config.out_dir, f"the database of study file {path.name}"
    else:
        export_dir, analysis_dir = locate(path)
        run_dir = path.parent if path.name in ("export", "analysis") else path
        source = f"{analysis_dir or export_dir}"
    out_dir = Path(out) if out is not None else run_dir / "report"

    if export_dir is not None and path.resolve() == export_dir.resolve():
        analysis_dir = None  # an export folder is analysed here, never read from a stale analysis beside it
    if analysis_dir is not None and not stability and seed is None:
        analysed = load(analysis_dir)
        task = analysed.task or (load(export_dir).task if export_dir else None)
        if task is None:
            raise HitkitError(f"cannot tell which task {analysis_dir} holds; give the export folder instead")
        export = load(export_dir) if export_dir is not None else None
        inp = ReportInput(
            task=task,
            tables=analysed.analysis,
            summary=analysed.summary,
            export=export.tables if export else {},
            info=export.info if export else {},
            source=f"analysis tables in {analysis_dir}",
            run_dir=run_dir,
        )
        files = write_report(inp, out_dir, extra_sections=extra_sections, name=name)
        files.analysis_dir = analysis_dir
        return files

    if export_dir is None:
        raise HitkitError(f"{path}: no exported tables to analyse; run `hitkit export` first")
    data = load(export_dir)
    task = config.task if config is not None else data.task
    if task is None:
        raise HitkitError(f"cannot tell which task {export_dir} holds (no study.json, votes, ratings or annotations)")
    use_seed = seed if seed is not None else (config.seed if config is not None else int(data.info.get("seed", 0)))
    result = run_analysis(task, export_dir, seed=use_seed, config=config, stability=stability)
    analysis_out = (run_dir / "analysis") if config is not None or export_dir.name == "export" else out_dir / "analysis"
    result.write(analysis_out)
    inp = ReportInput(
        task=task,
        tables=dict(result.tables),
        summary=dict(result.summary),
        export=data.tables,
        info=data.info,
        source=source if config is not None else f"exported tables in {export_dir}",
        criteria=_criteria_of(config),
        run_dir=run_dir,
    )
    files = write_report(inp, out_dir, extra_sections=extra_sections, name=name)
    files.analysis_dir = analysis_out
    return files


def summary_json(files: ReportFiles) -> str:
    """The report's files and methods paragraph as JSON (``hitkit report --json``)."""
    return json.dumps(files.as_json(), indent=2)
