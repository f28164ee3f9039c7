"""The report's line figures, one curve per system or variant: Spot The Bot's survival curves (time
until spotted) and its ranking stability; curves that lie on top of each other stay told apart by
their dashes and markers (:func:`curve_style`), not by colour alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.report.drawing import GREY, integer_ticks, message_png, new_figure, to_png

LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def curve_style(i: int) -> tuple[str, str]:
    """The i-th curve's (line style, marker): no two of the first 28 alike, so curves that lie on top of
    each other stay told apart by their dashes and markers, not by colour alone."""
    return LINE_STYLES[i % len(LINE_STYLES)], MARKERS[i % len(MARKERS)]


def step_curves(curves: pd.DataFrame) -> bytes:
    """Spot The Bot: Turnbull survival curve per system, S(k) = share still not spotted after k."""
    if curves.empty:
        return message_png("no bot annotations: no survival curves")
    fig = new_figure(6.5, 4)
    ax = fig.subplots()
    for i, (system, curve) in enumerate(curves.groupby("system", sort=True)):
        time = np.concatenate([[0.0], curve["time"].to_numpy(dtype=float)])
        surv = np.concatenate([[1.0], curve["survival"].to_numpy(dtype=float)])
        style, marker = curve_style(i)
        # Hollow markers of different shapes and sizes: a curve under another still shows its own.
        ax.plot(
            time,
            surv,
            drawstyle="steps-post",
            linestyle=style,
            linewidth=1.8,
            alpha=0.85,
            label=system,
            marker=marker,
            markevery=list(range(1, len(time))),
            markersize=7 - 0.8 * (i % 4),
            markerfacecolor="none",
        )
    integer_ticks(ax.xaxis)
    ax.set_xlabel("exchanges")
    ax.set_ylabel("survival: share of the bot not yet spotted")
    ax.set_ylim(0, 1.03)
    ax.set_xlim(left=0)
    ax.set_title("Turnbull estimate of time until spotted", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return to_png(fig)


def stability_curve(table: pd.DataFrame, level: float = 0.95) -> bytes:
    """Spot The Bot: share of the most frequent clustered ranking against conversations per pair."""
    if table.empty:
        return message_png("no stability rows")
    fig = new_figure(6.5, 4)
    ax = fig.subplots()
    for left_out, rows in table.groupby("left_out", sort=False):
        everyone = left_out == "none"
        ax.plot(
            rows["conversations_per_pair"],
            rows["top_share"],
            marker="." if everyone else None,
            label="all systems" if everyone else f"without {left_out}",
            linewidth=2.2 if everyone else 1,
            color="black" if everyone else None,
            alpha=1 if everyone else 0.7,
        )
    ax.axhline(level, color=GREY, linestyle="--", linewidth=1, label=f"{level:.0%}")
    integer_ticks(ax.xaxis)
    ax.set_xlabel("conversations per pair")
    ax.set_ylabel("share of the most frequent ranking")
    ax.set_ylim(0, 1.03)
    ax.set_title("Ranking stability", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return to_png(fig)
