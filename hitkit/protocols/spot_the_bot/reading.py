"""Reading Spot The Bot's annotations (METHODS §4): the values checked with the file and line of each
fault, repeated annotations resolved by the duplicate policy, and each segment annotation as one row
of its two entities (the input of the win rates, the ranking, survival and stability)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.inference import DEFAULT_DUPLICATES, DuplicatePolicy, apply_duplicate_policy
from hitkit.analysis.tables import keep_counted, read_table
from hitkit.errors import InputError
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS, FEATURES, LABEL_RANK, LABELS, SEGMENT_KEY

_FEATURE_VALUES = {"+1": 1, "1": 1, "0": 0, "-1": -1, "\u22121": -1}


def _where(source, index) -> dict:
    """InputError arguments for a row: the file and its line (header is line 1) or the row label."""
    if isinstance(source, Path):
        return {"path": source, "line": int(index) + 2}
    label = index.item() if isinstance(index, np.generic) else index
    return {"path": f"{source} row {label!r}"}


def _check_values(table: pd.DataFrame, source) -> pd.DataFrame:
    """Typed copy of the annotation table; InputError at the first bad value."""

    def fail(index, message):
        raise InputError(message=message, **_where(source, index))

    out = table.copy()
    for column in ("assignment_id", "worker_id", "conversation_id", "system"):
        text = out[column].astype(str).str.strip()
        empty = out.index[text == ""]
        if len(empty):
            fail(empty[0], f"{column} is empty; every annotation needs one")
        out[column] = text
    label = out["label"].astype(str).str.strip().str.lower()
    bad = out.index[~label.isin(LABELS)]
    if len(bad):
        fail(bad[0], f"label {out.at[bad[0], 'label']!r} is not one of human, unsure, bot")
    out["label"] = label
    entity = out["entity"].astype(str).str.strip()
    bad = out.index[~entity.isin(["0", "1"])]
    if len(bad):
        fail(bad[0], f"entity {out.at[bad[0], 'entity']!r} is not 0 or 1")
    out["entity"] = entity.astype(int)
    k = pd.to_numeric(out["segment_exchanges"].astype(str).str.strip(), errors="coerce")
    bad = out.index[~((k > 0) & (k == np.floor(k)))]
    if len(bad):
        fail(
            bad[0],
            f"segment_exchanges {out.at[bad[0], 'segment_exchanges']!r} is not a positive whole number of exchanges",
        )
    out["segment_exchanges"] = k.astype(int)
    for feature in FEATURES:
        value = out[feature].astype(str).str.strip().map(_FEATURE_VALUES)
        bad = out.index[value.isna()]
        if len(bad):
            fail(
                bad[0],
                f"{feature} {out.at[bad[0], feature]!r} is not +1, 0 or -1 (this "
                "entity better, same, worse than the other)",
            )
        out[feature] = value.astype(int)
    text = out["elapsed_s"].astype(str).str.strip()
    elapsed = pd.to_numeric(text, errors="coerce")
    # Negative, infinite or timestamp-sized values are read (and later flagged and counted by
    # implausible_times), not refused: released files have them.
    bad = out.index[elapsed.isna() & (text != "") & (text.str.lower() != "nan")]
    if len(bad):
        fail(
            bad[0],
            f"elapsed_s {out.at[bad[0], 'elapsed_s']!r} is not a number of seconds (leave it empty when unknown)",
        )
    out["elapsed_s"] = elapsed.astype(float)
    for column in ("study", "hit_id"):
        out[column] = out[column].astype(str).str.strip()
    return out


def _check_pairs(table: pd.DataFrame, source) -> None:
    """Each segment annotation has exactly entity 0 and entity 1, with mirrored preferences."""
    keys = SEGMENT_KEY + ["entity"]
    dup = table.index[table.duplicated(keys)]
    if len(dup):
        raise InputError(
            message=f"entity {table.at[dup[0], 'entity']} of this segment appears "
            "twice in one assignment; each segment annotation has one row per entity",
            **_where(source, dup[0]),
        )
    size = table.groupby(SEGMENT_KEY, sort=False)["entity"].transform("size")
    alone = table.index[size != 2]
    if len(alone):
        i = alone[0]
        raise InputError(
            message=f"entity {table.at[i, 'entity']} of conversation "
            f"{table.at[i, 'conversation_id']!r} ({table.at[i, 'segment_exchanges']} "
            "exchanges) has no row for the other entity in this assignment; export "
            "both speakers of every annotated segment",
            **_where(source, i),
        )
    zero = table[table["entity"] == 0].set_index(SEGMENT_KEY)
    one = table[table["entity"] == 1].rename_axis("_row").reset_index().set_index(SEGMENT_KEY).loc[zero.index]
    for feature in FEATURES:
        bad = np.flatnonzero(zero[feature].to_numpy() != -one[feature].to_numpy())
        if len(bad):
            i = one["_row"].iloc[bad[0]]
            this, other = (f"{x:+d}" if x else "0" for x in (one[feature].iloc[bad[0]], zero[feature].iloc[bad[0]]))
            raise InputError(
                message=f"{feature} is {this} for this entity but {other} for "
                "the other; one answer "
                "must read +1/-1 or 0/0 from the two sides",
                **_where(source, i),
            )


DUPLICATE_KEY = ["study", "worker_id", "conversation_id", "segment_exchanges"]
"""Two segment annotations with this key are one worker annotating one segment twice."""


def resolve_duplicates(
    table: pd.DataFrame, source, policy: DuplicatePolicy = DEFAULT_DUPLICATES
) -> tuple[pd.DataFrame, dict]:
    """Apply the duplicate policy to repeated segment annotations; returns (table, report).

    Released Spot The Bot files repeat annotations (the same worker, segment and entity twice).
    Rows are grouped into segment annotations first: within one assignment, the n-th row of
    entity 0 of a segment pairs with the n-th row of entity 1. Two segment annotations with the
    same :data:`DUPLICATE_KEY` are duplicates, resolved as a whole (both entities) by
    :func:`~hitkit.analysis.inference.apply_duplicate_policy`: ``first`` (default), ``last``,
    ``drop`` or ``error``. The report counts the repeated keys and the rows removed.
    """
    work = table.copy()
    work["_occurrence"] = work.groupby(SEGMENT_KEY + ["entity"], sort=False).cumcount()
    kept, report = apply_duplicate_policy(
        work,
        DUPLICATE_KEY,
        policy,
        what="segment annotation (same worker, segment)",
        source=source,
        unit=SEGMENT_KEY + ["_occurrence"],
    )
    return kept.drop(columns="_occurrence"), report


def load_annotations(
    in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES
) -> tuple[pd.DataFrame, dict]:
    """:func:`read_annotations` and the duplicate report of :func:`resolve_duplicates`; the report
    on repeated rows of ``assignments.csv`` (same policy) is in the table's
    ``attrs["assignment_duplicates"]``."""
    in_dir = Path(in_dir)
    path = in_dir / "annotations.csv"
    table = _check_values(read_table(path, ANNOTATION_COLUMNS), path)
    table, report = resolve_duplicates(table, path, duplicates)
    _check_pairs(table, path)
    table = keep_counted(table, in_dir, path, duplicates=duplicates)
    extra = [c for c in table.columns if c not in ANNOTATION_COLUMNS]
    out = table[list(ANNOTATION_COLUMNS) + extra].reset_index(drop=True)
    out.attrs["assignment_duplicates"] = table.attrs["assignment_duplicates"]
    return out, report


def read_annotations(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Read and check ``annotations.csv``; keep only rows of submitted or approved assignments.

    Without ``assignments.csv`` every row counts. Labels are lower-cased; entity,
    segment_exchanges and the three features become integers, elapsed_s a float (NaN when empty).
    Repeated annotations are resolved by the ``duplicates`` policy (:func:`resolve_duplicates`,
    with a warning that counts them). Raises :class:`~hitkit.errors.InputError` naming the file
    and line for a missing file or column, a bad value, a segment annotation without both
    entities, preferences that are not mirror images, or an assignment missing from
    ``assignments.csv``.
    """
    return load_annotations(in_dir, duplicates=duplicates)[0]


def segment_annotations(annotations: pd.DataFrame, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """One row per segment annotation (both entities side by side), in order of first appearance.

    Columns: the segment key, worker_id, system_0, system_1, label_0, label_1, outcome (+1 entity
    0's label ranks higher, 0 equal, −1 lower), the three features as entity 0 answered them, and
    elapsed_s (the larger of the two rows' values). Repeated annotations are resolved by
    ``duplicates`` (:func:`resolve_duplicates`).
    """
    missing = [c for c in ANNOTATION_COLUMNS if c not in annotations.columns]
    if missing:
        raise InputError("annotations", f"missing column(s) {missing}; expected {list(ANNOTATION_COLUMNS)}")
    table = _check_values(annotations[list(ANNOTATION_COLUMNS)], "annotations")
    table, _ = resolve_duplicates(table, "annotations", duplicates)
    _check_pairs(table, "annotations")
    table = table.reset_index(drop=True)
    table["_order"] = table.groupby(SEGMENT_KEY, sort=False).ngroup()
    zero = table[table["entity"] == 0].set_index(SEGMENT_KEY)
    one = table[table["entity"] == 1].set_index(SEGMENT_KEY).loc[zero.index]
    rank_0 = zero["label"].map(LABEL_RANK).to_numpy()
    rank_1 = one["label"].map(LABEL_RANK).to_numpy()
    out = pd.DataFrame(
        {
            "worker_id": zero["worker_id"].to_numpy(),
            "system_0": zero["system"].to_numpy(),
            "system_1": one["system"].to_numpy(),
            "label_0": zero["label"].to_numpy(),
            "label_1": one["label"].to_numpy(),
            "outcome": np.sign(rank_0 - rank_1).astype(int),
            **{f: zero[f].to_numpy() for f in FEATURES},
            "elapsed_s": np.fmax(zero["elapsed_s"].to_numpy(), one["elapsed_s"].to_numpy()),
            "_order": np.minimum(zero["_order"].to_numpy(), one["_order"].to_numpy()),
        },
        index=zero.index,
    ).reset_index()
    return out.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)
