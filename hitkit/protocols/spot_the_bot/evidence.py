"""Spot The Bot's agreement and ranking fragility (:mod:`hitkit.analysis.evidence`).

Agreement: the human / unsure / bot label of one speaker of one conversation shown up to the same
exchange (a unit: conversation, segment length, speaker), nominal alpha, per system of the speaker;
and the three feature questions (which speaker was more fluent, sensible, specific: −1, 0, +1) of one
segment, ordinal alpha per feature. Fragility: the games (segment annotations between two systems)
whose removal would flip adjacent systems of the win-rate ranking (wins / decisive games); TrueSkill
plays games in order and is not refitted here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.analysis.agreement import agreement_rows, scopes, worker_agreement
from hitkit.analysis.fragility import rate_influence, refit_fragility
from hitkit.protocols.spot_the_bot.annotations import FEATURES
from hitkit.protocols.spot_the_bot.reading import segment_annotations

LABEL_UNIT = ["study", "conversation_id", "segment_exchanges", "entity"]
SEGMENT_UNIT = ["study", "conversation_id", "segment_exchanges"]
RANKING = "win rate (decisive games)"


def evidence(
    annotations: pd.DataFrame, games: pd.DataFrame, ranking: pd.DataFrame, *, n_boot: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(agreement rows, fragility rows, per-worker label agreement) of read annotations, their ranking
    games (:func:`~hitkit.protocols.spot_the_bot.ranking.games`) and the ranking table."""
    labels = annotations.astype({c: str for c in LABEL_UNIT})
    rows = [
        agreement_rows(
            scopes(labels, ["system"]),
            measure="label",
            level="nominal",
            unit=LABEL_UNIT,
            coder="worker_id",
            value="label",
            n_boot=n_boot,
            seed=seed,
        )
    ]
    segments = segment_annotations(annotations).astype({c: str for c in SEGMENT_UNIT})
    features = segments.melt(
        id_vars=[*SEGMENT_UNIT, "worker_id"], value_vars=list(FEATURES), var_name="criterion", value_name="value"
    )
    features["value"] = pd.to_numeric(features["value"], errors="coerce")
    rows.append(
        agreement_rows(
            scopes(features, ["criterion"]),
            measure="feature",
            level="ordinal",
            unit=[*SEGMENT_UNIT, "criterion"],
            coder="worker_id",
            value="value",
            n_boot=n_boot,
            seed=seed,
        )
    )
    workers = worker_agreement(labels, level="nominal", unit=LABEL_UNIT, coder="worker_id", value="label")
    order = list(ranking.sort_values("win_rate", ascending=False, kind="stable")["system"])
    return pd.concat(rows, ignore_index=True), fragility(games, order), workers


def fragility(games: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Fragility rows of the win-rate ranking ``order`` (best first) of ranking games."""
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    decisive = ~games["drawn"].astype(bool).to_numpy()
    won = np.zeros((len(games), k))
    lost = np.zeros((len(games), k))
    won[np.flatnonzero(decisive), winner[decisive]] = 1.0
    lost[np.flatnonzero(decisive), loser[decisive]] = 1.0

    def scores(keep: np.ndarray) -> np.ndarray:
        wins, losses = keep @ won, keep @ lost
        played = wins + losses
        # A system left without a decisive game has no rate: 0.5, as the ranking's bootstrap says.
        return np.divide(wins, played, out=np.full(wins.shape, 0.5), where=played > 0)

    influence = rate_influence(winner, loser, decisive, k)
    return refit_fragility(systems, order, influence, scores, ranking=RANKING)
