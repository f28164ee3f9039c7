"""Style covariates the coordinator declares (``arena.style_covariates``), beside FastChat's four.

Each covariate is counted per side, over that side's replies, and enters style control exactly as
length and the markdown counts do: the normalised difference (a − b)/(a + b + 1), standardised
(:func:`hitkit.protocols.arena.bradley_terry.style_features`). A covariate is one of:

- a built-in feature (:data:`FEATURES`): fenced code blocks, links, markdown tables, question marks,
  emoji, paragraphs (blocks separated by a blank line);
- ``pattern``: a regular expression, its matches in the replies counted (fenced code removed first,
  as for the markdown counts);
- ``column``: counts the coordinator put in ``battles.csv`` as ``COLUMN_a`` and ``COLUMN_b``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from hitkit.errors import ConfigError, InputError
from hitkit.protocols.arena.options import Covariate
from hitkit.protocols.arena.style import CODE_BLOCK

EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
FEATURES: dict[str, Callable[[str], int]] = {
    "code_blocks": lambda text: len(CODE_BLOCK.findall(text)),
    "links": lambda text: len(re.findall(r"https?://\S+", text)),
    "tables": lambda text: len(re.findall(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", text, re.MULTILINE)),
    "questions": lambda text: text.count("?"),
    "emoji": lambda text: len(EMOJI.findall(text)),
    "paragraphs": lambda text: len([p for p in re.split(r"\n\s*\n", text) if p.strip()]),
}
"""The built-in features a covariate may name, each a count over one reply."""


def column_names(covariate: Covariate) -> tuple[str, str]:
    """The battle frame's columns that hold the covariate's two counts."""
    return f"style_{covariate.name}_a", f"style_{covariate.name}_b"


def _counter(covariate: Covariate) -> Callable[[str], int]:
    if covariate.feature is not None:
        return FEATURES[covariate.feature]
    try:
        pattern = re.compile(covariate.pattern or "", re.MULTILINE)
    except re.error as exc:
        raise ConfigError(
            f"arena.style_covariates '{covariate.name}': {covariate.pattern!r} is not a regular expression ({exc})"
        ) from None
    return lambda text: len(pattern.findall(CODE_BLOCK.sub("", text)))


def add_covariates(
    battles: pd.DataFrame, replies: dict[tuple[str, str, str], list[str]], covariates: Sequence[Covariate]
) -> pd.DataFrame:
    """``battles`` with two columns per covariate (:func:`column_names`). Reply features need the
    battles' replies (``replies``: (study, battle_id, side) → texts); a battle without them gets NaN, which
    leaves style control out as a battle without style counts does. A ``column`` covariate must be in
    the frame; InputError naming it otherwise, or naming a count that is not a number ≥ 0."""
    out = battles.copy()
    ids = list(zip(out["study"].astype(str), out["battle_id"].astype(str)))
    for covariate in covariates:
        left, right = column_names(covariate)
        if covariate.column is not None:
            for side, target in (("a", left), ("b", right)):
                source = f"{covariate.column}_{side}"
                if source not in out:
                    raise InputError(
                        "battles.csv",
                        f"style covariate '{covariate.name}' reads column {source}, which the battles lack; "
                        f"add {covariate.column}_a and {covariate.column}_b",
                    )
                values = pd.to_numeric(out[source], errors="coerce")
                if (values < 0).any() or values.isna().any():
                    raise InputError("battles.csv", f"{source} must hold counts (numbers ≥ 0) in every row")
                out[target] = values.astype(float)
            continue
        count = _counter(covariate)
        for side, target in (("a", left), ("b", right)):
            out[target] = [
                float(sum(count(t) for t in replies[b + (side,)])) if b + (side,) in replies else np.nan for b in ids
            ]
    return out
