"""Rating (Direct Assessment of responses) with judge labels from a file
(``hitkit analyze rating DIR --judge-labels FILE``).

The file (:mod:`hitkit.analysis.judge_labels`): ``unit`` an item of the export (da_ratings.csv's
``item_id``), ``system`` the system whose response to it the judge rated, ``criterion`` one of the
study's criteria and ``label`` the judge's rating on the slider's scale, 0–100 (as stated, before
negative criteria are reversed); optional ``confidence`` and ``human_probability`` (one per response).
A response is one rated text, as the analysis's clusters are (item/system). The analysis is live
chat's (:mod:`hitkit.protocols.live_chat.judge_file`): the judge standardised as one more worker, Y the
worker's z, several judges combined on held-out human labels, PPI++ per system and criterion, and
inverse-probability-weighted PPI++ with the file's ``human_probability``. Rating has no judge of its
own: this is how its analysis meets an LLM judge's labels.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def response_keys(z: pd.DataFrame, path: str | Path):
    """The file's (unit, system) → the analysis's response key (item/system), every system checked against
    the export's (the first unknown refused with its line and column); an item nobody rated is a response
    only the judge rated."""
    from hitkit.errors import InputError

    systems = set(z.loc[~z["is_control"], "system"].astype(str))

    def keys(raw: pd.DataFrame) -> pd.Series:
        if (raw["system"] == "").any():
            line = int(raw.loc[raw["system"] == "", "line"].iloc[0])
            raise InputError(path, "system is empty; every row names the system whose response it rates", line=line)
        # an item nobody rated is welcome (the judge rates every response, people a share): its row names its
        # system, so its response is known; only a system the export does not hold is refused
        bad = ~raw["system"].isin(systems)
        if bad.any():
            row = raw[bad].iloc[0]
            raise InputError(
                path, f"system {row['system']!r} is not one of the export's {sorted(systems)}", line=int(row["line"])
            )
        return raw["unit"] + "/" + raw["system"]

    return keys


def add_judge_file(result, z: pd.DataFrame, path: str | Path, criteria, *, seed: int = 0) -> None:
    """Add the judge's tables (``judge_calibration``, ``judge_scores``, ``judge_bias``), its summary
    (``judge``) and warnings to a rating analysis's ``result`` (``z``: its standardised ratings)."""
    from hitkit.protocols.live_chat.judge_file import add_judge_file as add

    add(result, z, path, criteria, seed=seed, unit_of=response_keys(z, path), what="rated response(s)")
