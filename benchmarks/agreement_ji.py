"""Krippendorff's alpha on Ji et al.'s (2022) released live-chat ratings, run 1, as `hitkit analyze` reports
it: per criterion and pooled, with the bootstrap interval over workers and systems, each checked against
the `krippendorff` package on the same values (the worker's mean rating of each system).

    .venv/bin/python benchmarks/agreement_ji.py [--n-boot 1000]

Ends with `RESULT alpha_all=… alpha_CRITERION=… … inside=N/M seconds=…`: inside counts the criteria
(and the pooled row) whose interval contains the package's alpha.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA  # noqa: E402
from hitkit.report.analyze import run_analysis  # noqa: E402


def data_dir() -> Path:
    shared = REPO.parent / "shared" / "data" / "ji2022-run1"
    return shared if (shared / "ratings.csv").is_file() else REPO / "tests" / "data" / "ji2022-run1"


def package_alphas(folder: Path) -> dict[str, float]:
    """The `krippendorff` package's alpha per criterion and pooled, on each worker's mean (oriented) rating
    of each system, from the counted assignments' intact ratings."""
    import krippendorff

    ratings = pd.read_csv(folder / "ratings.csv", dtype={"worker_id": str})
    assignments = pd.read_csv(folder / "assignments.csv", dtype={"assignment_id": str})
    counted = assignments[assignments["status"].isin(["submitted", "approved", "rejected"])]
    ratings = ratings[
        ratings["assignment_id"].astype(str).isin(counted["assignment_id"]) & (ratings["is_control"] == 0)
    ]
    negative = {c.name for c in DEFAULT_CRITERIA if c.polarity == "negative"}
    ratings = ratings.assign(
        oriented=np.where(ratings["criterion"].isin(negative), 100 - ratings["score"], ratings["score"])
    )
    means = ratings.groupby(["worker_id", "system", "criterion"], as_index=False)["oriented"].mean()
    out = {}
    for scope, rows in [("all", means), *[(f"criterion:{c}", r) for c, r in means.groupby("criterion")]]:
        matrix = rows.pivot_table(index="worker_id", columns=["system", "criterion"], values="oriented").to_numpy()
        out[scope] = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args()
    folder = data_dir()
    start = time.perf_counter()
    result = run_analysis("live_chat", folder, options={"n_boot": args.n_boot})
    seconds = time.perf_counter() - start
    table = result.tables["agreement"].set_index("scope")
    reference = package_alphas(folder)
    print(table[["alpha", "lower", "upper", "units", "coders"]].to_string(float_format=lambda v: f"{v:.3f}"))
    inside = sum(table.loc[s, "lower"] <= reference[s] <= table.loc[s, "upper"] for s in reference if s in table.index)
    same = max(abs(table.loc[s, "alpha"] - reference[s]) for s in reference if s in table.index)
    print(f"largest difference from the krippendorff package: {same:.1e}")
    parts = [f"alpha_{s.split(':')[-1]}={table.loc[s, 'alpha']:.3f}" for s in table.index]
    print(f"RESULT {' '.join(parts)} inside={inside}/{len(reference)} seconds={seconds:.1f}")


if __name__ == "__main__":
    main()
