"""Voter quality without control battles: each worker's votes tested against the other workers' model.

A real arena's votes come mostly without QC battles, so a worker is judged from their ordinary votes.
The null hypothesis for worker w is "an honest voter": each of w's votes is drawn from the model the
*other* workers' votes fit (leave-one-worker-out), i.e. for a battle of systems a (left) and b with
logit d (style-controlled Bradley–Terry where the battles have style counts, plain otherwise):

    P0(a) = (1 − τ)·σ(d),   P0(b) = (1 − τ)·σ(−d),   P0(tie) = τ

where τ is the other workers' share of ties and both-bad votes (Laplace-smoothed: (T + 1) / (N + 2)).
Against it stand fixed alternatives (:data:`ALTERNATIVES`), each a way of voting without reading:

- ``random``: a or b at a coin flip, whatever the replies say;
- ``any``: any of the four buttons at random (a, b, tie, both bad: a tie half the time);
- ``left`` / ``right``: the reply on that side, whatever it says (position-biased);
- ``tie``: a tie every time;
- ``longer``: the longer reply (tokens), where the battles have style counts.

Each alternative but ``any`` leaves ε (:data:`SLACK`) to every outcome it does not predict (``left``
puts 1 − 2ε on a, ε on b and on a tie; ``random`` ε on a tie), so that one vote out of character does not
clear a voter. The worker's e-value is the mixture

    E_w = Σ_j w_j Π_i q_j(y_i) / P0(y_i)

over the alternatives, with prior weights w_j summing to one (:data:`ALTERNATIVES`). Under the null
each product is a nonnegative martingale with mean one in the worker's votes, in any order, and so is
their mixture: by Ville's inequality P(E_w ≥ 1/α at any point of the study) ≤ α. A worker is
**flagged** when E_w ≥ 1/α (α = :data:`VOTER_ALPHA`, the false-flag rate per honest worker), and the
check may be repeated as votes come in (anytime-valid): live on the dashboard and in the QC policy as
in ``hitkit analyze``. The guarantee is exact when the null model is the honest voter's; the fitted
model stands in for it (``benchmarks/arena.py`` measures the false flags it gives on simulated crowds).

A worker is **judged** (may pass) once their battles would, on average, give each alternative enough
evidence to flag such a voter: the expected log-e-value Σ_i KL(q_j,i ‖ P0,i) of every alternative j
reaches log(1/(w_j·α)), what it needs to carry the mixture to 1/α alone. With fewer or less telling
votes the test has no power yet, and the worker is "not judged" rather than passed.

The fit leaves out each worker by one Newton step from the fit to all (φ₋w = φ̂ − H⁻¹·s_w, s_w the
worker's score sum, H the penalised information), refitted exactly for workers with at least
:data:`EXACT_SHARE` of the votes (where one step would be off). A second pass refits without the
workers the first flagged, so that spammers do not blur the null for the others. The fit's penalty is
style control's (½·reg·‖φ‖², reg 0.5 on every parameter): it keeps a system that few other workers saw
finite, at the price of calling such a pair closer than it is, which costs the test power against
random voters there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.leaderboard import Battles

ALTERNATIVES = {"random": 0.6, "any": 0.2, "left": 0.05, "right": 0.05, "tie": 0.05, "longer": 0.05}
"""The ways of voting without reading that the test looks for (module docstring), with their weights in
the mixture: a random voter is the hardest to tell from an honest one (a side-, tie- or length-biased
voter shows within a few votes), so it gets most of the prior weight."""
VOTER_ALPHA = 0.01
"""Default false-flag rate: an honest voter is flagged with probability at most this, at any time."""
SLACK = 0.05
"""ε: the probability an alternative leaves for each outcome it does not predict."""
EXACT_SHARE = 0.02
"""Workers with at least this share of the votes are left out by an exact refit, not one Newton step."""
PASSES = 2
"""Fits of the null: the second leaves out the workers the first flagged."""
A, B, TIE = 0, 1, 2
CODES = {"a": A, "b": B, "tie": TIE, "both_bad": TIE}
DESCRIBE = {
    "random": "votes like a coin flip between the two replies",
    "any": "votes at random among a, b, tie and both bad",
    "left": "votes for the left reply whatever it says",
    "right": "votes for the right reply whatever it says",
    "tie": "votes a tie whatever the replies say",
    "longer": "votes for the longer reply whatever it says",
}
VOTER_COLUMNS = ("worker_id", "votes", "e_value", "alternative", "vote_judged", "flagged")


@dataclass(frozen=True)
class Null:
    """The honest-voter model of each battle: [n, 3] probabilities of (a, b, tie) from the fit without
    the battle's worker."""

    probs: np.ndarray


def _design(data: Battles) -> np.ndarray:
    k = len(data.systems)
    if data.has_style:
        features, _, _ = bt.style_features(data.counts_a, data.counts_b)
        return bt.design(data.first, data.second, k, features)
    return bt.design(data.first, data.second, k)


def loo_logits(
    x: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    n_clusters: int,
    k: int,
    dropped: np.ndarray | None = None,
    reg: float = bt.STYLE_REG,
    exact_share: float = EXACT_SHARE,
) -> np.ndarray:
    """Each battle's logit (left over right) under the penalised logistic model fitted to the battles
    of every other worker; ``dropped`` [C] marks workers left out of every fit (their own battles get the
    fit to the rest). ``x`` [n, p] is the design (θ in its first ``k`` columns), ``y`` the outcomes."""
    n, p = x.shape
    dropped = np.zeros(n_clusters, dtype=bool) if dropped is None else np.asarray(dropped, dtype=bool)
    base = (~dropped[clusters]).astype(float)
    penalty = np.full(p, float(reg))
    phi = bt.fit_logistic(x, y, base, penalty, centre=k)[0]
    eta = x @ phi
    prob = 0.5 * (1.0 + np.tanh(0.5 * eta))
    ones = np.zeros(p)
    ones[:k] = 1.0
    hess = (x.T * (base * prob * (1.0 - prob))) @ x + np.diag(penalty) + np.outer(ones, ones)
    resid = base * (y - prob)
    scores = np.stack([np.bincount(clusters, weights=resid * x[:, j], minlength=n_clusters) for j in range(p)], 1)
    # φ₋w = φ̂ − H⁻¹·s_w: removing worker w's loss leaves s_w as the gradient at φ̂ (one Newton step).
    moves = np.linalg.solve(hess, scores.T).T  # [C, p]
    logits = eta - np.einsum("ij,ij->i", x, moves[clusters])
    counts = np.bincount(clusters, weights=base, minlength=n_clusters)
    big = np.flatnonzero(counts >= exact_share * max(base.sum(), 1.0))
    if len(big):
        weights = np.repeat(base[None, :], len(big), axis=0)
        weights *= clusters[None, :] != big[:, None]
        refits = bt.fit_logistic(x, y, weights, penalty, centre=k)
        for row, worker in enumerate(big):
            mine = clusters == worker
            logits[mine] = x[mine] @ refits[row]
    return logits


def null_model(data: Battles, codes: np.ndarray, dropped: np.ndarray | None = None) -> Null:
    """The honest-voter probabilities of every battle, its own worker left out (module docstring)."""
    x = _design(data)
    keep = np.ones(data.n_clusters, dtype=bool) if dropped is None else ~np.asarray(dropped, dtype=bool)
    logits = loo_logits(x, data.outcome, data.clusters, data.n_clusters, len(data.systems), dropped)
    counted = keep[data.clusters].astype(float)
    ties = np.bincount(data.clusters, weights=counted * (codes == TIE), minlength=data.n_clusters)
    votes = np.bincount(data.clusters, weights=counted, minlength=data.n_clusters)
    own_ties, own_votes = ties[data.clusters], votes[data.clusters]
    tau = (ties.sum() - own_ties + 1.0) / (votes.sum() - own_votes + 2.0)
    left = 0.5 * (1.0 + np.tanh(0.5 * logits))
    return Null(np.stack([(1 - tau) * left, (1 - tau) * (1 - left), tau], axis=1))


def alternatives(data: Battles, slack: float = SLACK) -> dict[str, np.ndarray]:
    """Each alternative's [n, 3] probabilities of (a, b, tie); ``longer`` only where battles have style
    counts."""
    n = len(data.first)

    def fixed(outcome: int) -> np.ndarray:
        out = np.full((n, 3), slack)
        out[:, outcome] = 1.0 - 2.0 * slack
        return out

    out = {
        "random": np.tile([(1 - slack) / 2, (1 - slack) / 2, slack], (n, 1)),
        "any": np.tile([0.25, 0.25, 0.5], (n, 1)),
        "left": fixed(A),
        "right": fixed(B),
        "tie": fixed(TIE),
    }
    if data.has_style:
        longer = np.sign(data.counts_a[:, 0] - data.counts_b[:, 0])
        side = np.full((n, 3), slack)
        side[:, A] = np.where(longer > 0, 1 - 2 * slack, np.where(longer < 0, slack, (1 - slack) / 2))
        side[:, B] = np.where(longer < 0, 1 - 2 * slack, np.where(longer > 0, slack, (1 - slack) / 2))
        out["longer"] = side
    return out


def _per_worker(values: np.ndarray, clusters: np.ndarray, n_clusters: int) -> np.ndarray:
    return np.stack(
        [np.bincount(clusters, weights=values[:, j], minlength=n_clusters) for j in range(values.shape[1])], 1
    )


def evidence(
    data: Battles, codes: np.ndarray, null: Null, alts: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(log e-value [C, m] of each worker under each alternative, the expected log e-value [C, m] a
    voter of that alternative would reach on the same battles)."""
    p0 = np.clip(null.probs, 1e-300, None)
    rows = np.arange(len(codes))
    log_ratio = np.stack([np.log(q[rows, codes]) - np.log(p0[rows, codes]) for q in alts.values()], axis=1)
    expected = np.stack([(q * (np.log(q) - np.log(p0))).sum(axis=1) for q in alts.values()], axis=1)
    return _per_worker(log_ratio, data.clusters, data.n_clusters), _per_worker(expected, data.clusters, data.n_clusters)


def voter_table(battles: pd.DataFrame, alpha: float = VOTER_ALPHA, passes: int = PASSES) -> pd.DataFrame:
    """Per worker of ``battles`` (leaderboard battles: no QC battles, no leaks): votes, e_value (the
    mixture over :data:`ALTERNATIVES`), alternative (the one with the most evidence), vote_judged (the
    test could have flagged each kind of voter on these battles) and flagged (e_value ≥ 1/``alpha``)."""
    if not 0 < alpha < 1:
        raise ValueError(f"the voter test's false-flag rate is {alpha}; it must lie between 0 and 1")
    if battles.empty:
        return pd.DataFrame(columns=list(VOTER_COLUMNS))
    data = Battles.of(battles)
    codes = battles["vote"].map(CODES).to_numpy(int)
    dropped = np.zeros(data.n_clusters, dtype=bool)
    for _ in range(max(1, passes)):
        null = null_model(data, codes, dropped)
        alts = alternatives(data)
        log_e, expected = evidence(data, codes, null, alts)
        weights = np.array([ALTERNATIVES[name] for name in alts])
        weights = weights / weights.sum()  # without style counts there is no "longer"
        mixture = np.logaddexp.reduce(log_e + np.log(weights), axis=1)
        flagged = mixture >= math.log(1.0 / alpha)
        if np.array_equal(flagged, dropped) or flagged.all():
            break
        dropped = flagged
    names = list(alts)
    workers = pd.factorize(pd.Series(battles["worker_id"].astype(str).to_numpy()), sort=True)[1]
    votes = np.bincount(data.clusters, minlength=data.n_clusters)
    return pd.DataFrame(
        {
            "worker_id": list(workers),
            "votes": votes.astype(int),
            # e-values as evidence, capped for display; the flag uses the exact log.
            "e_value": np.exp(np.minimum(mixture, 700.0)),
            "alternative": [names[j] for j in log_e.argmax(axis=1)],
            "vote_judged": (expected >= np.log(1.0 / (weights * alpha))).all(axis=1),
            "flagged": flagged,
        },
        columns=list(VOTER_COLUMNS),
    )


def reason(alternative: str, e_value: float, alpha: float) -> str:
    """Why a worker was flagged, in words: what they vote like and the evidence against honesty."""
    return f"{DESCRIBE.get(alternative, alternative)} (e-value {e_value:.3g} ≥ 1/α = {1 / alpha:g})"
