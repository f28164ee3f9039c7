"""The report's figures: each function takes the analysis tables and returns one PNG as bytes.

Rankings, intervals, pair matrices, criterion bars, quality control and spend; the line figures are
in :mod:`hitkit.report.curves`, and what every figure shares (sizes, colours, PNG bytes) in
:mod:`hitkit.report.drawing`. Figures grow with the number of systems so labels never overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hitkit.report.drawing import (
    BLUE,
    CELL_FONT,
    COLUMN_IN,
    GREEN,
    GREY,
    LABEL_CHARS,
    ORANGE,
    RED,
    integer_ticks,
    message_png,
    new_figure,
    short_labels,
    text_inches,
    to_png,
)


def interval_ranking(
    systems: Sequence[str],
    score: Sequence[float],
    low: Sequence[float] | None,
    high: Sequence[float] | None,
    *,
    xlabel: str,
    title: str,
    zero_line: bool = True,
    labels: Sequence[str] | None = None,
) -> bytes:
    """Systems best at the top: a point per score, with its interval where there is one."""
    n = len(systems)
    if not n:
        return message_png("nothing to rank")
    scores = np.asarray(score, dtype=float)
    y = np.arange(n)[::-1]
    fig = new_figure(6.5, 1.3 + 0.42 * n)
    ax = fig.subplots()
    if low is not None and high is not None:
        lows, highs = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        ok = ~(np.isnan(lows) | np.isnan(highs))
        ax.hlines(y[ok], lows[ok], highs[ok], color=BLUE, linewidth=2.2, alpha=0.55)
    ax.plot(scores, y, "o", color=BLUE, markersize=7, zorder=3)
    for yi, s in zip(y, scores):
        if not math.isnan(s):
            ax.annotate(f"{s:.2f}", (s, yi), xytext=(0, 7), textcoords="offset points", ha="center", fontsize=8)
    if zero_line:
        ax.axvline(0, color=GREY, linewidth=0.8, linestyle=":")
    ax.set_yticks(y, list(labels) if labels is not None else list(systems))
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return to_png(fig)


def compared_intervals(
    labels: Sequence[str],
    estimates: Sequence[tuple[str, Sequence[float], Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    title: str,
    reference: float | None = None,
) -> bytes:
    """Several estimates of each row's quantity, one above the other, each a point with its interval
    (``estimates``: (name, estimate, low, high) per kind, shown in that order with a legend)."""
    n = len(labels)
    estimates = drawn(estimates)  # the legend names only what has a point on the figure
    if not n or not estimates:
        return message_png("nothing to compare")
    colours = (GREY, ORANGE, BLUE, GREEN, RED)
    k = len(estimates)
    fig = new_figure(6.5, 1.5 + 0.3 * n * k)
    ax = fig.subplots()
    base = np.arange(n)[::-1] * (k + 1)
    for i, (name, est, low, high) in enumerate(estimates):
        y = base + (k - 1 - i)
        ests, lows, highs = (np.asarray(v, dtype=float) for v in (est, low, high))
        ok = ~(np.isnan(lows) | np.isnan(highs))
        ax.hlines(y[ok], lows[ok], highs[ok], color=colours[i % len(colours)], linewidth=2.2, alpha=0.6)
        ax.plot(ests, y, "o", color=colours[i % len(colours)], markersize=6, zorder=3, label=name)
    if reference is not None:
        ax.axvline(reference, color=GREY, linewidth=0.8, linestyle=":")
    ax.set_yticks(base + (k - 1) / 2, short_labels(labels, 2 * LABEL_CHARS))
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return to_png(fig)


def drawn(estimates: Sequence[tuple]) -> list[tuple]:
    """The (name, estimate, …) kinds with at least one finite estimate: the rest would be a legend entry
    with no point (Spot The Bot's "judge only" once was)."""
    return [e for e in estimates if np.isfinite(np.asarray(e[1], dtype=float)).any()]


def rank_ranges(
    ranking: pd.DataFrame, *, low: str = "rank_low", high: str = "rank_high", cluster: str = "cluster", title: str
) -> bytes:
    """Each system's 95 % bootstrap rank range as a bar on the rank axis, its cluster written beside."""
    n = len(ranking)
    if not n:
        return message_png("nothing to rank")
    y = np.arange(n)[::-1]
    fig = new_figure(6.5, 1.3 + 0.42 * n)
    ax = fig.subplots()
    clusters = list(dict.fromkeys(ranking[cluster]))
    colours = [BLUE, ORANGE, GREEN, RED, "#8e44ad", "#16a085"]
    for yi, row in zip(y, ranking.itertuples(index=False)):
        lo, hi, label = getattr(row, low), getattr(row, high), getattr(row, cluster)
        colour = colours[clusters.index(label) % len(colours)]
        ax.barh(yi, hi - lo + 0.6, left=lo - 0.3, height=0.5, color=colour, alpha=0.75)
        ax.text(hi + 0.45, yi, f"cluster {label}", va="center", fontsize=8)
    ax.set_yticks(y, list(ranking["system"]))
    ax.set_xticks(range(1, n + 1))
    ax.set_xlim(0.4, n + 1.6)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("rank (1 = best): 95 % bootstrap range")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return to_png(fig)


def pair_matrix(
    values: pd.DataFrame,
    *,
    marks: pd.DataFrame | None = None,
    title: str,
    colorbar: str,
    cmap: str = "RdBu",
    vmin: float = -1.0,
    vmax: float = 1.0,
    fmt=None,
    mark_note: str = "",
    row_label: str = "row",
    col_label: str = "column",
) -> bytes:
    """A square heatmap of ``values`` (rows and columns are systems), each cell written out with
    ``fmt`` (a function of the value); cells where ``marks`` is true get a star. Systems without
    any value are left out."""
    from matplotlib import colormaps

    # A system that met no other system (human–human material: only self-chat) has an empty row.
    keep = [name for name in values.index if values.loc[name].notna().any() or values[name].notna().any()]
    values = values.loc[keep, keep]
    marks = marks.loc[keep, keep] if marks is not None else None
    names = list(values.index)
    n = len(names)
    if not n:
        return message_png("no pairs to compare")
    grid = values.to_numpy(dtype=float)
    texts = [(fmt(v) if fmt is not None else f"{v:.2f}") + "*" for v in grid.ravel() if not math.isnan(v)]
    labels = short_labels(names)
    # Cells just wide enough for their longest text at CELL_FONT, so that neighbouring values never
    # overprint, and the figure no wider than the report's column (a wider PNG is shrunk, text and
    # all); with too many systems for that, cells of at least 0.45 in and a smaller font.
    label = text_inches(max(labels, key=len), 10) + 0.4
    bar = 1.2  # the colour bar, its ticks and its label
    needed = text_inches(max(texts, key=len, default="0.00*"), CELL_FONT) + 0.15
    cell = max(0.45, min(needed, (COLUMN_IN - label - bar) / n))
    font = CELL_FONT * min(1.0, cell / needed)
    width = label + cell * n + bar
    height = 0.75 * label + cell * n + 0.9  # x labels at 45°, the title
    fig = new_figure(width, height)
    ax = fig.subplots()
    image = ax.imshow(
        np.ma.masked_invalid(grid), cmap=colormaps[cmap].with_extremes(bad="0.9"), vmin=vmin, vmax=vmax, aspect="auto"
    )
    norm = image.norm
    for (i, j), value in np.ndenumerate(grid):
        if math.isnan(value):
            continue
        star = "*" if marks is not None and bool(marks.iat[i, j]) else ""
        shade = colormaps[cmap](norm(value))
        dark = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] < 0.5
        text = fmt(value) if fmt is not None else f"{value:.2f}"
        ax.text(j, i, text + star, ha="center", va="center", fontsize=font, color="white" if dark else "black")
    rotate = n > 3 or max(map(len, labels)) > 6
    ax.set_xticks(
        range(n), labels, rotation=45 if rotate else 0, ha="right" if rotate else "center", rotation_mode="anchor"
    )
    ax.set_yticks(range(n), labels)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    ax.set_title(title + (f"\n{mark_note}" if mark_note else ""), fontsize=9)
    fig.colorbar(image, ax=ax, label=colorbar, fraction=0.05, pad=0.02)
    return to_png(fig)


def criterion_bars(systems: pd.DataFrame, criteria: Sequence[str]) -> bytes:
    """Grouped bars: mean z per criterion (groups) for each system (bars), best system first."""
    criteria = [c for c in criteria if c in systems.columns]
    if systems.empty or not criteria:
        return message_png("no criterion scores")
    from matplotlib import colormaps

    n_sys = len(systems)
    width = 0.8 / n_sys
    x = np.arange(len(criteria))
    fig = new_figure(min(COLUMN_IN, max(6.5, 0.5 + len(criteria) * (0.45 + 0.18 * n_sys))), 4.2)
    ax = fig.subplots()
    cmap = colormaps["viridis"]
    for k, row in enumerate(systems.itertuples(index=False)):
        values = [getattr(row, c) for c in criteria]
        ax.bar(
            x - 0.4 + width * (k + 0.5),
            values,
            width=width * 0.95,
            label=row.system,
            color=cmap(k / max(n_sys - 1, 1) * 0.9),
        )
    ax.axhline(0, color="black", linewidth=0.7)
    ax.set_xticks(x, criteria)
    ax.set_ylabel("mean z (per-worker standardised; higher = better)")
    ax.set_title("Per-criterion scores of the workers who passed QC (negative criteria reversed)", fontsize=10)
    # One row of systems when they fit (read left to right, best first), else rows of 6.
    ax.legend(
        fontsize=8, ncol=n_sys if n_sys <= 10 else 6, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False
    )
    ax.grid(axis="y", alpha=0.3)
    return to_png(fig)


def qc_pass(workers: pd.DataFrame, alpha: float, test: str = "QC bot rated lower than real systems") -> bytes:
    """Left: workers passed / failed QC. Right: the distribution of the workers' QC p-values."""
    fig = new_figure(8, 3.4)
    left, right = fig.subplots(1, 2, width_ratios=[1, 2])
    passed = int(workers["passed"].astype(bool).sum())
    failed = len(workers) - passed
    bars = left.bar(["passed", "failed"], [passed, failed], color=[GREEN, RED], width=0.6)
    for bar, count in zip(bars, [passed, failed]):
        share = count / len(workers) if len(workers) else 0
        left.annotate(
            f"{count} ({share:.0%})",
            (bar.get_x() + bar.get_width() / 2, count),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=9,
        )
    left.set_ylabel("workers")
    left.set_ylim(0, max(passed, failed, 1) * 1.2)
    left.set_title("QC outcome", fontsize=10)
    p = pd.to_numeric(workers["p_value"], errors="coerce")
    missing = int(p.isna().sum())
    p = p.dropna().clip(lower=1e-12)
    if len(p):
        edges = np.logspace(np.floor(np.log10(p.min())), 0, 25)
        right.hist(p, bins=edges, color=BLUE, alpha=0.8)
        right.set_xscale("log")
    right.axvline(alpha, color=RED, linestyle="--", linewidth=1.2, label=f"pass if p < {alpha}")
    right.set_xlabel(f"one-sided Mann–Whitney p ({test})")
    right.set_ylabel("workers")
    integer_ticks(left.yaxis)
    integer_ticks(right.yaxis)
    note = f"; {missing} without a p-value (fail)" if missing else ""
    right.set_title(f"QC test p-values{note}", fontsize=10)
    right.legend(fontsize=8)
    return to_png(fig)


def agreement_histogram(workers: pd.DataFrame) -> bytes:
    """Pairwise: each worker's agreement with the other workers' majority, flagged workers in red."""
    rate = pd.to_numeric(workers["agree_with_majority"], errors="coerce")
    flagged = workers["flagged"].astype(str).str.lower().isin(["true", "1"])
    fig = new_figure(6.5, 3.2)
    ax = fig.subplots()
    bins = np.linspace(0, 1, 21)
    ax.hist(
        [rate[~flagged].dropna(), rate[flagged].dropna()],
        bins=bins,
        stacked=True,
        color=[BLUE, RED],
        label=["not flagged", "flagged (p < 0.05)"],
    )
    ax.set_xlabel("share of votes agreeing with the other workers' majority")
    ax.set_ylabel("workers")
    integer_ticks(ax.yaxis)
    ax.set_title("Worker agreement", fontsize=10)
    ax.legend(fontsize=8)
    return to_png(fig)


def cost_bar(paid: dict[str, float], pending: float, budget: float | None, currency: str) -> bytes:
    """One stacked bar of what was paid (rewards, bonuses, fees) and still pending, against the budget."""
    fig = new_figure(7.5, 2.4)
    ax = fig.subplots()
    left = 0.0
    colours = {"reward": BLUE, "bonus": GREEN, "fee": ORANGE}
    for kind in ("reward", "bonus", "fee"):
        amount = paid.get(kind, 0.0)
        if amount > 0:
            ax.barh(0, amount, left=left, color=colours[kind], label=f"{kind}s {amount:.2f}", height=0.5)
            left += amount
    if pending > 0:
        ax.barh(0, pending, left=left, color=GREY, alpha=0.5, hatch="//", label=f"pending {pending:.2f}", height=0.5)
        left += pending
    if budget:
        ax.axvline(budget, color=RED, linewidth=2, label=f"budget {budget:.2f}")
        ax.annotate(
            f"{left / budget:.0%} of budget",
            (left, 0),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_xlim(0, max(left, budget or 0, 0.01) * 1.12)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    ax.set_xlabel(currency)
    fig.legend(fontsize=8, ncol=5, loc="outside lower center", frameon=False)
    ax.set_title("Spend against budget", fontsize=10)
    return to_png(fig)


def people_judge_ppi(labels: Sequence[str], table: pd.DataFrame, *, xlabel: str, title: str, reference: float) -> bytes:
    """A judge table's three estimates per row (columns ``human``, ``judge``, ``ppi`` and their
    ``_low``/``_high``): people only, judge only and prediction-powered, with their intervals."""
    return compared_intervals(
        list(labels),
        [
            (name, table[col], table[f"{col}_low"], table[f"{col}_high"])
            for name, col in (("people only", "human"), ("judge only", "judge"), ("prediction-powered", "ppi"))
        ],
        xlabel=xlabel,
        title=title,
        reference=reference,
    )


def judge_win_rates(table: pd.DataFrame, xlabel: str) -> bytes:
    """A judged study's ``judge_win_rates``: each pair's win rate human-only, judge-only and
    prediction-powered, with their intervals (``xlabel`` says how ties count)."""
    return people_judge_ppi(
        [f"{a} over {b}" for a, b in zip(table["system_a"], table["system_b"])],
        table,
        xlabel=xlabel,
        title="Win rates with 95 % intervals",
        reference=0.5,
    )
