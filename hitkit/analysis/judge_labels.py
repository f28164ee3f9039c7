"""Judge labels from a file (``hitkit analyze TASK DIRECTORY --judge-labels FILE``): released data sets with
LLM-judge verdicts beside human votes, analysed with the same estimators as hitkit's own judging.

The file is a tidy table, CSV or JSON Lines (one object a line), one row per judge call
(:data:`JUDGE_LABEL_COLUMNS`; docs/COLUMNS.md). Several rows for one unit and judge (display orders,
samples) are averaged; several judges per unit are kept apart, each its own predictor
(:mod:`hitkit.analysis.judges_combined` combines them and measures each one's calibration).
Every bad cell is refused with the file, its line and what was wrong. Pure reading: no database.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.errors import InputError

REQUIRED = ("unit", "judge", "label")
OPTIONAL = ("system_a", "system_b", "confidence", "human_probability")
JUDGE_LABEL_COLUMNS = (*REQUIRED, *OPTIONAL)
"""``--judge-labels``: ``unit`` the item's key in the export (pairwise ``item_id``); ``judge`` a name for
the judge model or prompt; ``label`` a, b or tie for the first system, or a number in [0, 1] (its
probability of winning, e.g. from log-probabilities); ``system_a``/``system_b`` the pair the label
reads, either way round (an item answered by several systems holds a comparison per pair: each unit and
pair is its own; default: the unit's one pair); ``confidence`` in [0, 1] (default: the agreement of the
unit's calls); ``human_probability`` in (0, 1], the probability the comparison was sent to people (one
value per unit and pair; default: every one alike, the uniform rule). The other tasks read ``unit`` and ``label``
their own way and add their own columns (a :class:`LabelScale`, ``read_judge_labels``'s ``required`` and
``optional``; each task's ``judge_file`` module, docs/COLUMNS.md)."""

SCORES = {"a": 1.0, "b": 0.0, "tie": 0.5}


@dataclass(frozen=True)
class LabelScale:
    """How a protocol reads the ``label`` column: ``words`` (lower case) to numbers, and numbers within
    [``low``, ``high``] (no numbers where ``low`` is None); ``text`` says so in an error."""

    words: dict[str, float] = field(default_factory=lambda: dict(SCORES))
    low: float | None = 0.0
    high: float = 1.0
    text: str = "a, b, tie or a number in [0, 1]"


PAIR = LabelScale()
"""Pairwise and arena labels: a, b or tie for the first system, or its probability of winning."""


def _rows(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(path, "not found; give a CSV or JSON Lines file of judge labels (docs/COLUMNS.md)")
    if path.suffix.lower() == ".parquet":  # hitkit's own export of several judges' labels in parquet
        table = pd.read_parquet(path).astype(object).where(lambda t: t.notna(), "").astype(str)
        table["_line"] = np.arange(len(table)) + 1
    elif path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, f"is not JSON ({exc.msg}); one object a line", line=number) from None
            if not isinstance(row, dict):
                raise InputError(path, "is not a JSON object; one object a line", line=number)
            rows.append({**{k: ("" if v is None else str(v)) for k, v in row.items()}, "_line": number})
        table = pd.DataFrame(rows).fillna("")  # a key missing from some objects is a blank cell
    else:
        try:
            table = pd.read_csv(path, dtype=str, keep_default_na=False)
        except pd.errors.EmptyDataError:
            raise InputError(path, f"is empty; it needs a header row with {', '.join(REQUIRED)}") from None
        table["_line"] = np.arange(len(table)) + 2
    if table.empty:
        raise InputError(path, "holds no judge labels")
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; needs {list(REQUIRED)}, optional {list(OPTIONAL)}")
    return table


def _number(path: Path, table: pd.DataFrame, column: str, low: float, high: float, *, open_low: bool) -> pd.Series:
    """The column as numbers within [low, high] ((low, high] with ``open_low``); blank is NaN."""
    text = table[column].astype(str).str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce")
    bad = (text != "") & (values.isna() | (values <= low if open_low else values < low) | (values > high))
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        interval = f"({low:g}, {high:g}]" if open_low else f"[{low:g}, {high:g}]"
        raise InputError(
            path, f"{column} {table[column].iloc[i]!r} is not a number in {interval}", line=int(table["_line"].iloc[i])
        )
    return values


def read_judge_labels(
    path: str | Path, scale: LabelScale = PAIR, *, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()
) -> pd.DataFrame:
    """The file's labels, checked: unit, judge, system_a, system_b ('' where not given), score (the
    label read by ``scale``; pairwise: the first system's score in [0, 1]), confidence and
    human_probability (NaN where not given), line; and a protocol's own ``required`` and ``optional``
    columns as stripped text ('' where not given; a blank required cell is refused with its line)."""
    path = Path(path)
    table = _rows(path)
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise InputError(
            path, f"missing column(s) {missing}; needs {[*REQUIRED, *required]}, optional {[*OPTIONAL, *optional]}"
        )
    for column in (*OPTIONAL, *optional):
        if column not in table.columns:
            table[column] = ""
    for column in ("unit", "judge", *required):
        blank = table[column].astype(str).str.strip() == ""
        if blank.any():
            line = int(table.loc[blank, "_line"].iloc[0])
            raise InputError(path, f"{column} is empty; every row needs its {column}", line=line)
    label = table["label"].astype(str).str.strip().str.lower()
    score = label.map(scale.words)
    numeric = pd.to_numeric(label.where(score.isna()), errors="coerce")
    if scale.low is None:
        numeric[:] = np.nan
    bad = score.isna() & (numeric.isna() | (numeric < (scale.low or 0)) | (numeric > scale.high))
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        raise InputError(
            path, f"label {table['label'].iloc[i]!r} is not {scale.text}", line=int(table["_line"].iloc[i])
        )
    out = pd.DataFrame(
        {
            "unit": table["unit"].astype(str).str.strip(),
            "judge": table["judge"].astype(str).str.strip(),
            "system_a": table["system_a"].astype(str).str.strip(),
            "system_b": table["system_b"].astype(str).str.strip(),
            "score": score.fillna(numeric).astype(float),
            "confidence": _number(path, table, "confidence", 0, 1, open_low=False),
            "human_probability": _number(path, table, "human_probability", 0, 1, open_low=True),
            "line": table["_line"].astype(int),
            **{c: table[c].astype(str).str.strip() for c in (*required, *optional)},
        }
    )
    one_sided = (out["system_a"] == "") != (out["system_b"] == "")
    if one_sided.any():
        line = int(out.loc[one_sided, "line"].iloc[0])
        raise InputError(path, "gives one of system_a and system_b; give both or neither", line=line)
    # one probability per comparison: a unit and, where the rows name it, its pair of systems (either way round)
    low = np.minimum(out["system_a"], out["system_b"])
    high = np.maximum(out["system_a"], out["system_b"])
    given = out.assign(low=low, high=high).dropna(subset=["human_probability"])
    varying = given.groupby(["unit", "low", "high"])["human_probability"].nunique()
    if (varying > 1).any():
        unit, a, b = varying[varying > 1].index[0]
        line = int(given.loc[(given["unit"] == unit) & (given["low"] == a), "line"].iloc[0])
        what = f"unit {unit!r}" + (f" ({a} vs {b})" if a else "")
        raise InputError(path, f"{what} has more than one human_probability; give one per comparison", line=line)
    return out


KEY_SEPARATOR = "\x1f"
"""Joins a comparison's unit and systems into one key (a character no unit key or system name holds)."""


def comparison_key(unit, system_a, system_b):
    """The key of the comparison of ``system_a`` and ``system_b`` (alphabetical) in ``unit`` (arrays or scalars)."""
    return (
        pd.Series(unit, dtype=str).to_numpy(object)
        + KEY_SEPARATOR
        + (pd.Series(system_a, dtype=str) + KEY_SEPARATOR + pd.Series(system_b, dtype=str)).to_numpy(object)
    )


def comparisons(labels: pd.DataFrame, voted: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """The labels of a pairwise file keyed by comparison, as a unit of the votes may hold several pairs of
    systems (a prompt answered by every system): ``voted`` has unit, system_a < system_b of every voted
    comparison. A row naming its systems is that comparison (a label read for the swapped pair is 1 − score),
    voted or not; a row naming none is the unit's one comparison (voted, or named by the file's other rows),
    and is refused (file and line) when the unit holds several, or dropped (counted in
    ``attrs["unknown_units"]``) when no vote or row names the unit's pair. A system no vote names is refused. Returns unit, key, judge, system_a, system_b, score, confidence,
    human_probability."""
    systems = set(voted["system_a"]) | set(voted["system_b"])
    named = (labels["system_a"] != "").to_numpy()
    itself = named & (labels["system_a"] == labels["system_b"]).to_numpy()
    if itself.any():
        row = labels[itself].iloc[0]
        raise InputError(
            path, f"compares {row['system_a']!r} with itself; system_a and system_b must differ", line=int(row["line"])
        )
    if systems and named.any():
        stray = named & ~(labels["system_a"].isin(systems) & labels["system_b"].isin(systems)).to_numpy()
        if stray.any():
            row = labels[stray].iloc[0]
            other = row["system_a"] if row["system_a"] not in systems else row["system_b"]
            raise InputError(
                path,
                f"names system {other!r}, which no vote names (the votes name {sorted(systems)})",
                line=int(row["line"]),
            )
    a, b = labels["system_a"].to_numpy(object), labels["system_b"].to_numpy(object)
    swapped = named & (a > b)
    out = labels.assign(
        system_a=np.where(swapped, b, a),
        system_b=np.where(swapped, a, b),
        score=np.where(swapped, 1 - labels["score"].to_numpy(float), labels["score"].to_numpy(float)),
    )
    # the pairs each unit is known to hold: its voted ones and those the file's rows name
    known_pairs = pd.concat([voted[["unit", "system_a", "system_b"]], out.loc[named, ["unit", "system_a", "system_b"]]])
    by_unit = known_pairs.drop_duplicates().groupby("unit")
    count = by_unit.size()
    bare = out[~named]
    several = bare["unit"].map(count).fillna(0) > 1
    if several.any():
        row = bare[several].iloc[0]
        pairs = known_pairs[known_pairs["unit"] == row["unit"]]
        shown = ", ".join(sorted({f"{x} vs {y}" for x, y in zip(pairs["system_a"], pairs["system_b"])}))
        raise InputError(
            path,
            f"unit {row['unit']!r} compares several pairs ({shown}); give the row's system_a and system_b",
            line=int(row["line"]),
        )
    only = by_unit.first()
    known = bare["unit"].isin(only.index)
    fill = bare[known]
    out.loc[fill.index, "system_a"] = only.loc[fill["unit"], "system_a"].to_numpy()
    out.loc[fill.index, "system_b"] = only.loc[fill["unit"], "system_b"].to_numpy()
    out = out.drop(index=bare.index[~known.to_numpy()])
    out["key"] = comparison_key(out["unit"], out["system_a"], out["system_b"])
    result = out[["unit", "key", "judge", "system_a", "system_b", "score", "confidence", "human_probability"]]
    result = result.reset_index(drop=True)
    result.attrs["unknown_units"] = int((~known).sum())
    return result


def per_judge(labels: pd.DataFrame, key: str = "unit") -> pd.DataFrame:
    """One row per unit (or ``key``: pairwise, the comparison) and judge: the mean score of its calls,
    their count and a confidence (the file's mean where given, else the calls' agreement |2·mean − 1|)."""
    grouped = labels.groupby([key, "judge"], sort=True)
    table = grouped.agg(
        system_a=("system_a", "first"),
        system_b=("system_b", "first"),
        score=("score", "mean"),
        calls=("score", "size"),
        confidence=("confidence", "mean"),
        human_probability=("human_probability", "first"),
    ).reset_index()
    table["confidence"] = table["confidence"].where(table["confidence"].notna(), (2 * table["score"] - 1).abs())
    return table


def unit_probability(labels: pd.DataFrame, units, key: str = "unit") -> np.ndarray | float:
    """Each unit's (or ``key``'s) probability of having gone to people: the file's ``human_probability``
    (every unit must have one, if any has), else 1.0 (uniform: the constant's value does not change the
    estimate)."""
    given = labels.dropna(subset=["human_probability"]).groupby(key)["human_probability"].first()
    if given.empty:
        return 1.0
    values = pd.Series(list(units)).map(given)
    if values.isna().any():
        first = str(pd.Series(list(units))[values.isna()].iloc[0])
        unit, *pair = first.split(KEY_SEPARATOR)
        named = repr(unit) + (f" ({pair[0]} vs {pair[1]})" if len(pair) == 2 else "")
        raise ValueError(
            f"{int(values.isna().sum())} unit(s) have no human_probability while others have one (first: unit "
            f"{named}); give it for every unit or for none"
        )
    return values.to_numpy(float)


def finite(value: float) -> float | None:
    """A number for the summary, None where it is not finite."""
    return float(value) if value is not None and math.isfinite(value) else None
