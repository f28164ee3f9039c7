"""What every report figure shares: its size limits, colours and fonts, a new figure, PNG bytes.

matplotlib's object API only (no pyplot): no global state, the Agg renderer, safe in threads and on
headless machines. The figures themselves are in :mod:`hitkit.report.plots` and
:mod:`hitkit.report.curves`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

DPI = 110
COLUMN_IN = 8.6
"""Widest figure, in inches: the report's text column (1000 px less its padding) at :data:`DPI`. A
wider PNG is shrunk to the column by the browser, and its 8-point text with it."""
CELL_FONT = 9
"""Points of the numbers written in a pair matrix's cells."""
LABEL_CHARS = 20
"""Longest system name written whole on an axis; longer ones are cut with an ellipsis."""
BLUE, ORANGE, GREY, RED, GREEN = "#3b6ea8", "#e08a2c", "#888888", "#c0392b", "#2e8b57"


def new_figure(width: float, height: float):
    """An empty figure of ``width`` × ``height`` inches whose layout keeps labels inside it."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def integer_ticks(axis) -> None:
    """Ticks on whole numbers only (counts, exchanges, conversations)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def to_png(fig) -> bytes:
    """Render ``fig`` as PNG bytes."""
    buffer = io.BytesIO()
    # "tight" keeps a colour-bar label or a long tick label from being cut off at the edge.
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.08)
    return buffer.getvalue()


def text_inches(text: str, points: float) -> float:
    """About how wide ``text`` is at ``points`` (DejaVu Sans averages 0.6 em a character)."""
    return len(text) * points * 0.6 / 72


def short_labels(names: Sequence[str], limit: int = LABEL_CHARS) -> list[str]:
    """Axis labels: a name longer than ``limit`` is cut to ``limit`` characters ending in "…",
    unless that would make two labels alike (then the names stay whole)."""
    cut = [n if len(n) <= limit else n[: limit - 1] + "…" for n in map(str, names)]
    return cut if len(set(cut)) == len(cut) else [str(n) for n in names]


def message_png(text: str) -> bytes:
    """A small figure that says ``text`` (why there is nothing to draw), in place of the figure."""
    fig = new_figure(5, 1.2)
    ax = fig.subplots()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=10, color=GREY, wrap=True)
    ax.set_axis_off()
    return to_png(fig)
