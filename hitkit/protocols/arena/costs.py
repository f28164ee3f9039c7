"""What each system costs (``costs.csv``): latency, tokens, price and energy per system, beside its rating.

From every bot reply of the study's arena conversations (:mod:`.transcripts`):

- ``first_token_ms`` / ``reply_ms``: the median milliseconds from asking the bot to its first text and
  to its whole reply, over the replies where they were measured (live bots; empty where none was);
- tokens by hitkit's rule (:func:`hitkit.protocols.arena.style.count_tokens`, words and punctuation,
  about 0.75 of GPT-4's tokenizer on English prose), output = the reply, input = every earlier turn of
  its conversation (a chat API is sent the whole history each turn);
- price (``arena.costs.SYSTEM``: per million input and output tokens): the mean price of one reply and
  the study's total;
- energy, where the study says how: ``watts`` × the reply's time, or ``kwh_per_million_tokens`` ×
  output tokens; in watt-hours per reply and in total.

``pareto`` marks the systems on the rating–cost front: no other system is rated higher at no greater
cost. The cost is the price per reply where the study prices systems, else the energy per reply, else
the median reply time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from hitkit.protocols.arena.options import SystemCost
from hitkit.report import drawing

COST_BASES = {
    "price_per_reply": "price per reply",
    "energy_wh_per_reply": "energy per reply (Wh)",
    "reply_ms": "median time to the whole reply (ms)",
}


def _energy_wh(turns: pd.DataFrame, cost: SystemCost | None) -> pd.Series:
    if cost is None:
        return pd.Series(math.nan, index=turns.index)
    if cost.watts is not None:
        return turns["reply_ms"] / 3_600_000 * cost.watts
    if cost.kwh_per_million_tokens is not None:
        return turns["output_tokens"] / 1e6 * cost.kwh_per_million_tokens * 1000
    return pd.Series(math.nan, index=turns.index)


def cost_table(turns: pd.DataFrame, costs: Mapping[str, SystemCost], board: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(costs.csv, the cost the Pareto front uses: a key of :data:`COST_BASES`) for the systems of
    ``board`` (the leaderboard) from the bot replies ``turns``."""
    rows = []
    for system in board["system"]:
        mine = turns[turns["system"] == system]
        cost = costs.get(system)
        row: dict = {
            "system": system,
            "replies": len(mine),
            "first_token_ms": float(mine["first_token_ms"].median()) if mine["first_token_ms"].notna().any() else None,
            "reply_ms": float(mine["reply_ms"].median()) if mine["reply_ms"].notna().any() else None,
            "input_tokens": int(mine["input_tokens"].sum()),
            "output_tokens": int(mine["output_tokens"].sum()),
            "output_tokens_per_reply": float(mine["output_tokens"].mean()) if len(mine) else None,
        }
        if cost is not None and len(mine):
            price = (
                mine["input_tokens"] * cost.input_per_million + mine["output_tokens"] * cost.output_per_million
            ) / 1e6
            row.update(price_per_reply=float(price.mean()), price_total=float(price.sum()), currency=cost.currency)
            energy = _energy_wh(mine, cost)
            if energy.notna().any():
                row.update(energy_wh_per_reply=float(energy.mean()), energy_wh_total=float(energy.sum()))
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in ("price_per_reply", "price_total", "currency", "energy_wh_per_reply", "energy_wh_total"):
        if column not in table:
            table[column] = None
    rated = board.set_index("system")
    rating = rated["rating_style"] if rated["rating_style"].notna().all() else rated["rating"]
    table["rating"] = table["system"].map(rating)
    basis = next((b for b in COST_BASES if table[b].notna().any()), "reply_ms")
    table["pareto"] = pareto(table["rating"].to_numpy(float), pd.to_numeric(table[basis]).to_numpy(float))
    return table, basis


def pareto(rating: np.ndarray, cost: np.ndarray) -> list[bool]:
    """Whether each system is on the front: no other is rated higher at a cost no greater (or as high
    at a lower cost). A system without a cost is not on it."""
    out = []
    for i in range(len(rating)):
        if math.isnan(cost[i]) or math.isnan(rating[i]):
            out.append(False)
            continue
        beaten = (cost <= cost[i]) & (rating >= rating[i]) & ((cost < cost[i]) | (rating > rating[i])) & ~np.isnan(cost)
        out.append(not bool(beaten.any()))
    return out


def pareto_figure(table: pd.DataFrame, basis: str) -> bytes:
    """Rating against cost, one point per system, the Pareto front joined by a line."""
    known = table[pd.to_numeric(table[basis]).notna()]
    if known.empty:
        return drawing.message_png("no system has a measured cost")
    cost = pd.to_numeric(known[basis]).to_numpy(float)
    rating = known["rating"].to_numpy(float)
    fig = drawing.new_figure(6.5, 4.0)
    ax = fig.subplots()
    front = known["pareto"].to_numpy(bool)
    ax.plot(cost[~front], rating[~front], "o", color=drawing.GREY, markersize=7, label="dominated")
    ax.plot(cost[front], rating[front], "o", color=drawing.BLUE, markersize=8, label="Pareto front")
    order = np.argsort(cost[front])
    ax.plot(cost[front][order], rating[front][order], "-", color=drawing.BLUE, alpha=0.5, drawstyle="steps-post")
    for x, y, name in zip(cost, rating, known["system"]):
        ax.annotate(str(name), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    currency = next((c for c in known["currency"] if isinstance(c, str) and c), "")
    label = COST_BASES[basis] + (f" ({currency})" if basis == "price_per_reply" and currency else "")
    ax.set_xlabel(label)
    ax.set_ylabel("Arena rating")
    ax.set_title("Rating against cost (up and left is better)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return drawing.to_png(fig)
