"""What the protocols' report sections (``hitkit/protocols/NAME/report.py``) share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd


def written(tables: Mapping[str, pd.DataFrame], named: Sequence[tuple[str, str]]) -> list[tuple[str, pd.DataFrame]]:
    """(caption, table) of each (name, caption) in ``named`` whose table the analysis wrote, in that order:
    a section's optional tables."""
    return [(caption, tables[name]) for name, caption in named if name in tables]
