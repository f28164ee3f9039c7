"""``hitkit replay``: what a stopping rule would have done on a finished study or a released data set.

The study folder's units (counted assignments with answers) are taken in ``orders`` seeded random
orders; in each, the rule looks after every unit (:mod:`hitkit.analysis.replay`, which computes each
pair's sequence incrementally), and each pair's row says when it settled (the share of the study's units
seen) and which system it claimed. With ``decision`` ``pair`` every pair is its own study with
``stop: decision: pair`` on it; with ``pairs``, ``clear`` or ``best`` the study-level rule fires once, over
the watched pairs with α shared by Bonferroni, and every pair's row is its state then.

The protocol's ``replay`` module reads the folder (its own readers: the checks and the counted work of
``hitkit analyze``) into observations; :func:`check_against_rule` recomputes a few looks of the first
order through the protocol's live ``comparisons``, :func:`~hitkit.analysis.sequential.intervals` and
:func:`~hitkit.analysis.sequential.settle` on the tables cut at that look, so a replay that drifted from
the rule says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.replay import (
    DECISION_CHOICES,
    observation_count,
    observed_share,
    orders,
    replay_order,
    share_of,
    trace,
)
from hitkit.analysis.replay_data import ReplayData, direction, full_data_estimate
from hitkit.analysis.sequential import BOUNDED_REFERENCE, intervals
from hitkit.analysis.signflip import REFERENCE as FLIP_REFERENCE
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS

ROW_COLUMNS = ["order", "system_a", "system_b", "stop_share", "winner"]
SUMMARY_COLUMNS = [
    "system_a",
    "system_b",
    "observations",
    "estimate",
    "full_direction",
    "full_winner",
    "orders",
    "settled",
    "median_stop_share",
    "claims_a",
    "claims_b",
    "agree",
    "opposite",
]
"""``replay_summary.csv``: per pair the rule's observations on all the data in the study's order (one per
worker; Spot The Bot: the workers whose annotations its sign-flip test counts), the estimate on all its answers (the protocol's units; the direction it favours) and the rule's
verdict on all of it in the study's order, then over the orders:
the share in which the pair settled, the median share of the units seen when it did, the share claiming
a and claiming b, and the shares claiming the full data's direction (``agree``) and its opposite."""


@dataclass
class ReplayResult:
    """The replay's rows (one per order and pair), its summary (one row per pair) and its settings."""

    rows: pd.DataFrame
    summary: pd.DataFrame
    info: dict = field(default_factory=dict)

    def write(self, out: Path) -> list[Path]:
        """Write replay.csv, replay_summary.csv and replay_summary.json into ``out``."""
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "replay.csv", out / "replay_summary.csv", out / "replay_summary.json"]
        self.rows.to_csv(paths[0], index=False, float_format="%.6g")
        self.summary.to_csv(paths[1], index=False, float_format="%.6g")
        payload = {**self.info, "pairs": json.loads(self.summary.to_json(orient="records"))}
        paths[2].write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return paths


def read_study(task: str, directory: Path, config=None) -> ReplayData:
    """The folder's observations, read by the protocol's ``replay`` module; a clear error when there is
    nothing to replay."""
    from hitkit.tables.loading import TASK_TABLES, check_task_folder

    if task not in PROTOCOLS:
        raise HitkitError(f"unknown task {task!r}; one of {', '.join(PROTOCOLS)}")
    directory = Path(directory)
    if not directory.is_dir():
        raise HitkitError(f"{directory} is not a folder; `hitkit replay {task}` reads a folder of exported tables")
    try:
        check_task_folder(task, directory)
    except HitkitError as exc:  # its advice names `hitkit analyze`; say it for replay
        other = next((t for name, t in TASK_TABLES.items() if name != PROTOCOLS[task].table and name in str(exc)), None)
        raise HitkitError(
            f"{directory} holds no {PROTOCOLS[task].table}.csv"
            + (f" but {other}'s table; run `hitkit replay {other} {directory}`" if other else "")
        ) from None
    if not any((directory / f"{PROTOCOLS[task].table}{s}").is_file() for s in (".csv", ".parquet")):
        raise HitkitError(f"{directory} holds no {PROTOCOLS[task].table}.csv, the table of {task}'s answers")
    data = PROTOCOLS[task].module("replay").replay_data(directory, config)
    if not data.units:
        raise HitkitError(f"{directory}: no counted {data.unit_name} with answers; there is nothing to replay")
    if len(data.systems) < 2:
        raise HitkitError(
            f"{directory}: the answers name {len(data.systems)} system(s) ({', '.join(data.systems) or 'none'}); "
            "a stopping rule compares two or more"
        )
    return data


def replay(
    data: ReplayData, *, orders_count: int = 200, seed: int = 0, decision: str = "pair", alpha: float = 0.05
) -> ReplayResult:
    """The rule over ``orders_count`` seeded orders of the study's units (module docstring)."""
    if decision not in DECISION_CHOICES:
        raise HitkitError(f"decision {decision!r} is not one of {', '.join(DECISION_CHOICES)}")
    if not 0 < alpha < 1:
        raise HitkitError(f"alpha {alpha} is not between 0 and 1")
    if orders_count < 1:
        raise HitkitError(f"orders {orders_count}: replay at least one order")
    total = len(data.units)
    positions = orders(total, orders_count, seed)
    rows = []
    for r in range(orders_count):
        for pair, (look, won) in zip(data.pairs, replay_order(data, positions[r], decision, alpha)):
            rows.append(
                (r, pair.a, pair.b, share_of(look, total), pair.a if won > 0 else (pair.b if won < 0 else None))
            )
    table = pd.DataFrame(rows, columns=ROW_COLUMNS)
    own = np.arange(total)  # the study's own order: the full-data verdict
    full = replay_order_at_end(data, own, decision, alpha)
    summary = pd.DataFrame([_pair_summary(data, pair, table, full[i]) for i, pair in enumerate(data.pairs)])
    summary = summary[SUMMARY_COLUMNS]
    info = {
        "task": data.task,
        "units": total,
        "unit": data.unit_name,
        "systems": data.systems,
        "orders": orders_count,
        "seed": seed,
        "decision": decision,
        "alpha": alpha,
        "method": (
            FLIP_REFERENCE + "; each conversation counted for the worker who reached it first"
            if data.fresh_items
            else BOUNDED_REFERENCE + "; one observation per worker, their first HIT holding the pair"
        )
        + (
            "; each pair its own study (stop: decision: pair), alpha each"
            if decision == "pair"
            else f"; decision {decision} over the watched pairs, Bonferroni"
        ),
    }
    return ReplayResult(table, summary, info)


def _alpha_each(data: ReplayData, decision: str, alpha: float) -> float:
    return alpha if decision == "pair" else alpha / max(len(data.watched), 1)


def replay_order_at_end(data: ReplayData, position: np.ndarray, decision: str, alpha: float) -> list[int]:
    """Each pair's winner (+1 a, −1 b, 0 none) on all the data in the order ``position``."""
    each = _alpha_each(data, decision, alpha)
    share = observed_share(data, position)
    return [int(trace(data, p, position, each, share).winner[-1]) if p.planned > 0 else 0 for p in data.pairs]


def _pair_summary(data: ReplayData, pair, table: pd.DataFrame, full: int) -> dict:
    own = table[(table["system_a"] == pair.a) & (table["system_b"] == pair.b)]
    settled = own["stop_share"].notna()
    estimate = full_data_estimate(data, pair)
    way = direction(data, estimate)
    favoured = {1: pair.a, -1: pair.b}.get(way)
    opposite = {1: pair.b, -1: pair.a}.get(way)
    return {
        "system_a": pair.a,
        "system_b": pair.b,
        "observations": observation_count(data, pair),
        "estimate": estimate,
        "full_direction": favoured,
        "full_winner": {1: pair.a, -1: pair.b}.get(full),
        "orders": len(own),
        "settled": float(settled.mean()),
        "median_stop_share": float(own.loc[settled, "stop_share"].median()) if settled.any() else None,
        "claims_a": float((own["winner"] == pair.a).mean()),
        "claims_b": float((own["winner"] == pair.b).mean()),
        "agree": float((own["winner"] == favoured).mean()) if favoured else None,
        "opposite": float((own["winner"] == opposite).mean()) if opposite else None,
    }


def check_against_rule(
    data: ReplayData, position: np.ndarray, decision: str, alpha: float, looks: list[int], config=None
) -> list[str]:
    """Differences between the replay and the protocol's live rule at ``looks`` of the order ``position``:
    the rule's ``comparisons`` on the tables cut after each look, its ``intervals`` at the replay's α per
    pair, each pair's winner and whether it is settled. An empty list: they agree."""
    if data.tables is None:
        return []
    module = PROTOCOLS[data.task].module("sequential")
    each = _alpha_each(data, decision, alpha)
    share = observed_share(data, position)
    traces = {(p.a, p.b): trace(data, p, position, each, share) for p in data.watched}
    plan = data.plan if data.plan is not None else {(p.a, p.b): p.planned for p in data.pairs}
    arrival = np.argsort(position)
    units = np.asarray(data.units, dtype=object)
    problems = []
    for look in looks:
        seen = list(units[arrival[: look + 1]])
        keep = set(seen)
        tables = {name: frame[frame["assignment_id"].astype(str).isin(keep)] for name, frame in data.tables.items()}
        tables["assignments"] = pd.DataFrame({"assignment_id": seen, "status": "submitted"})
        found = [c for c in module.comparisons(tables, data.systems, plan, config=config) if c.planned > 0]
        for i in _each_interval(found, each):
            t = traces.get((i.a, i.b))
            if t is None:
                continue
            won = 1 if i.winner == i.a else (-1 if i.winner == i.b else 0)
            if won != t.winner[look] or (i.settled, i.undecided) != (bool(t.settled[look]), bool(t.undecided[look])):
                problems.append(
                    f"after {look + 1} {data.unit_name}, {i.a}–{i.b}: the rule says winner {i.winner or 'none'}, "
                    f"settled {i.settled}, undecided {i.undecided}; the replay says winner "
                    f"{ {1: i.a, -1: i.b}.get(int(t.winner[look]), 'none') }, settled {bool(t.settled[look])}, "
                    f"undecided {bool(t.undecided[look])}"
                )
    return problems


def _each_interval(found, each: float):
    """Every comparison's interval at level ``each`` (one at a time, so no further Bonferroni share)."""
    return [i for c in found for i in intervals([c], each)]


def console_lines(result: ReplayResult) -> list[str]:
    """The summary in words, one line per pair."""
    info = result.info
    lines = [
        f"{info['task']}: {info['units']} {info['unit']} replayed in {info['orders']} orders (seed {info['seed']}), "
        f"decision {info['decision']}, alpha {info['alpha']}; {info['method']}"
    ]
    for row in result.summary.to_dict("records"):
        a, b = row["system_a"], row["system_b"]
        if not row["observations"]:
            lines.append(f"{a}–{b}: no observations; never settles")
            continue
        median = row["median_stop_share"]
        way = row["full_direction"]
        lines.append(
            f"{a}–{b}: settled in {row['settled']:.0%} of orders"
            + (f" at a median {median:.0%} of the {info['unit']}" if median is not None and median == median else "")
            + f"; claims {a} {row['claims_a']:.0%}, {b} {row['claims_b']:.0%}; "
            + (
                f"full data favour {way} (the rule on all of it: {row['full_winner'] or 'no claim'}): "
                f"{row['agree']:.0%} of orders claim it, {row['opposite']:.0%} the opposite"
                if way
                else "full data favour neither"
            )
        )
    return lines
