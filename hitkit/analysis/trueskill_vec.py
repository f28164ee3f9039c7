"""One-versus-one TrueSkill (Herbrich et al. 2006) in closed form, vectorised across replicates.

A two-player game needs none of TrueSkill's factor-graph iteration: the posterior is the
truncated-Gaussian update with the ``v`` and ``w`` functions. Here it is written for arrays of
shape ``[n_replicates, n_systems]`` (:func:`play_flat` plays one game on the flattened state),
so 1000 bootstrap resamples play their game ``t`` in one numpy step. The defaults and every
formula follow the ``trueskill`` package (0.4.5): ``tau`` is added to each player's variance
before the game, and the draw margin is
``ppf((draw_probability + 1) / 2) · √2 · beta``. With ``TrueSkill(backend="scipy")`` the package
gives the same ratings to ~1e-12; its default backend approximates ``erfc`` (~1e-7 relative), which
drifts from this by about 1e-6 over a few dozen games.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
# Below this, pdf / cdf loses precision (both near underflow); see _v_w_win.
_TAIL_X = -30.0


@dataclass(frozen=True)
class TrueSkillEnv:
    """TrueSkill constants; the defaults are the ``trueskill`` package's."""

    mu: float = 25.0
    sigma: float = 25.0 / 3
    beta: float = 25.0 / 6
    tau: float = 25.0 / 300
    draw_probability: float = 0.10

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and self.beta > 0 and self.tau >= 0):
            raise ValueError(f"{self}: sigma and beta must be > 0 and tau >= 0")
        if not 0 <= self.draw_probability < 1:
            raise ValueError(f"draw_probability={self.draw_probability!r}; use 0 <= p < 1")

    @functools.cached_property  # read once per game by play_flat: computed once per env
    def draw_margin(self) -> float:
        """The performance difference below which a one-versus-one game is a draw."""
        return float(special.ndtri((self.draw_probability + 1) / 2)) * math.sqrt(2) * self.beta


DEFAULT_ENV = TrueSkillEnv()
"""The ``trueskill`` package's defaults: mu 25, sigma 25/3, beta σ/2, tau σ/100, 10 % draws."""


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x - _LOG_SQRT_2PI)


def _v_w_win(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """v and w of a win at ``x`` = (mean difference − draw margin) / c."""
    with np.errstate(divide="ignore", invalid="ignore"):  # fixed just below
        v = _pdf(x) / special.ndtr(x)
    # Far in the lower tail pdf and cdf underflow: there v = √(2/π) / erfcx(−x/√2) (the same
    # ratio with the exp(−x²/2) cancelled), which is slower, so only where it is needed.
    tail = np.flatnonzero(x < _TAIL_X)
    if len(tail):
        v[tail] = _SQRT_2_OVER_PI / special.erfcx(x[tail] * -_SQRT_HALF)
    return v, v * (v + x)


def _v_w_draw(t: np.ndarray, margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """v and w of a draw at ``t`` = mean difference / c, ``margin`` = draw margin / c."""
    a = margin - np.abs(t)
    b = -margin - np.abs(t)
    denominator = special.ndtr(a) - special.ndtr(b)
    pa, pb = _pdf(a), _pdf(b)
    v = (pb - pa) / denominator
    w = v * v + (a * pa - b * pb) / denominator
    return np.where(t < 0, -v, v), w


def play_flat(
    mu: np.ndarray, var: np.ndarray, first: np.ndarray, second: np.ndarray, drawn: np.ndarray | None, env: TrueSkillEnv
) -> None:
    """Play one game per replicate on flat state, updating ``mu`` and ``var`` (σ²) in place.

    ``mu`` and ``var`` are 1-D (replicate r's system s at ``r * n_systems + s``); ``first`` and
    ``second`` are flat positions into them, one pair per replicate, no position twice;
    ``drawn`` (or None: no draws) marks the drawn games. One numpy step per operation for all
    replicates: this is the inner loop of every bootstrap and of the stability analysis.
    """
    tau2 = env.tau * env.tau
    mu_1, mu_2 = mu.take(first), mu.take(second)
    var_1 = var.take(first)
    var_1 += tau2
    var_2 = var.take(second)
    var_2 += tau2
    c2 = var_1 + var_2
    c2 += 2 * env.beta * env.beta
    c = np.sqrt(c2)
    t = mu_1 - mu_2
    t /= c
    margin = env.draw_margin / c
    v, w = _v_w_win(t - margin)
    if drawn is not None:
        at = np.flatnonzero(drawn)
        if len(at):
            v[at], w[at] = _v_w_draw(t[at], margin[at])
    v /= c
    w /= c2
    mu[first] = mu_1 + var_1 * v
    mu[second] = mu_2 - var_2 * v
    var[first] = var_1 * (1 - var_1 * w)
    var[second] = var_2 * (1 - var_2 * w)


def rate_sequences(
    first: np.ndarray, second: np.ndarray, drawn: np.ndarray, n_systems: int, env: TrueSkillEnv = DEFAULT_ENV
) -> tuple[np.ndarray, np.ndarray]:
    """Ratings after playing game sequences from the prior; returns ``(mu, sigma)``.

    ``first``, ``second`` (system indices, winner first unless drawn) and ``drawn`` are
    ``[n_replicates, n_games]``, or 1-D for one sequence; the result is ``[n_replicates,
    n_systems]`` (``[n_systems]`` for 1-D input). Games are played in column order.
    """
    first, second, drawn = (np.asarray(x) for x in (first, second, drawn))
    one = first.ndim == 1
    first, second, drawn = (np.atleast_2d(x) for x in (first, second, drawn))
    if not first.shape == second.shape == drawn.shape:
        raise ValueError(f"first {first.shape}, second {second.shape} and drawn {drawn.shape} must have the same shape")
    if np.any(first == second):
        raise ValueError("a system cannot play itself: first and second must differ")
    drawn = drawn.astype(bool)
    if env.draw_probability == 0 and drawn.any():
        raise ValueError("a game is drawn but draw_probability is 0; give the environment a draw probability > 0")
    n_replicates, n_games = first.shape
    mu = np.full(n_replicates * n_systems, float(env.mu))
    var = np.full(n_replicates * n_systems, float(env.sigma) ** 2)
    base = np.arange(n_replicates) * n_systems
    # Column-major copies so that game t of every replicate is one contiguous read.
    first_t, second_t = np.asfortranarray(first), np.asfortranarray(second)
    any_drawn = np.asarray(drawn.any(axis=0))
    for game in range(n_games):
        play_flat(
            mu, var, base + first_t[:, game], base + second_t[:, game], drawn[:, game] if any_drawn[game] else None, env
        )
    mu, sigma = mu.reshape(n_replicates, n_systems), np.sqrt(var).reshape(n_replicates, n_systems)
    return (mu[0], sigma[0]) if one else (mu, sigma)


def rate_repeated(
    first: np.ndarray,
    second: np.ndarray,
    drawn: np.ndarray,
    weights: np.ndarray,
    n_systems: int,
    env: TrueSkillEnv = DEFAULT_ENV,
) -> tuple[np.ndarray, np.ndarray]:
    """Ratings when replicate r plays game g ``weights[r, g]`` times, games in their order.

    ``first``, ``second``, ``drawn`` describe one sequence of n games (1-D); ``weights`` is
    [n_replicates, n] whole numbers (a cluster bootstrap: each game as often as its cluster was
    drawn). Replicates differ in length, so they are played longest first and step t only
    touches the replicates that still have a game t. Returns ``(mu, sigma)``, [n_replicates,
    n_systems].
    """
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    drawn = np.asarray(drawn, dtype=bool)
    weights = np.asarray(weights, dtype=np.int64)
    if np.any(first == second):
        raise ValueError("a system cannot play itself: first and second must differ")
    if env.draw_probability == 0 and drawn[weights.sum(axis=0) > 0].any():
        raise ValueError("a game is drawn but draw_probability is 0; give the environment a draw probability > 0")
    n_replicates = weights.shape[0]
    lengths = weights.sum(axis=1)
    order = np.argsort(-lengths, kind="stable")
    longest = int(lengths.max()) if n_replicates else 0
    games = np.zeros((longest, n_replicates), dtype=np.int64)  # game-major: step t is one row
    every = np.arange(len(first))
    for rank, r in enumerate(order):
        games[: lengths[r], rank] = np.repeat(every, weights[r])
    active = (lengths[order][None, :] > np.arange(longest)[:, None]).sum(axis=1)
    mu = np.full(n_replicates * n_systems, float(env.mu))
    var = np.full(n_replicates * n_systems, float(env.sigma) ** 2)
    base = np.arange(n_replicates) * n_systems
    for t in range(longest):
        stop = int(active[t])
        g = games[t, :stop]
        d = drawn[g]
        play_flat(mu, var, base[:stop] + first[g], base[:stop] + second[g], d if d.any() else None, env)
    mu, sigma = mu.reshape(n_replicates, n_systems), np.sqrt(var).reshape(n_replicates, n_systems)
    back = np.empty_like(order)
    back[order] = np.arange(n_replicates)
    return mu[back], sigma[back]


# An observed tie rate of 1 cannot be a draw probability (the draw margin would be infinite).
_MAX_DRAW_PROBABILITY = 0.999


@dataclass(frozen=True)
class TrueSkillSettings:
    """The TrueSkill settings of a ranking; ``None`` means "derived", as documented per field.

    Defaults follow the original Spot The Bot code and Dušek et al. (2018), not the ``trueskill``
    package: ``tau`` = 0 (no dynamics: no drift that lets late games outweigh early ones, as the
    package's 25/300 does, which on the paper's data merges the clusters; the updates are still one
    game at a time, so μ depends on the games' order: on the paper's data no reordering of 20 changed
    the ranking, but μ moved by a median largest 0.87 on a spread of 3.66), ``draw_probability`` None = the observed tie rate of the games.
    ``sigma`` None = mu / 3 and ``beta`` None = sigma / 2 (the package's relations).
    """

    mu: float = 25.0
    sigma: float | None = None
    beta: float | None = None
    tau: float = 0.0
    draw_probability: float | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.mu):
            raise ValueError(f"mu={self.mu!r}; give a finite prior mean")
        for name in ("sigma", "beta"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name}={value!r}; it must be > 0")
        if not self.tau >= 0:
            raise ValueError(f"tau={self.tau!r}; it must be >= 0 (0 = no dynamics)")
        if self.draw_probability is not None and not 0 <= self.draw_probability < 1:
            raise ValueError(f"draw_probability={self.draw_probability!r}; use 0 <= p < 1")

    def env_for(self, games: pd.DataFrame) -> TrueSkillEnv:
        """The environment for ``games`` (winner, loser, drawn): fills in the derived settings."""
        sigma = self.sigma if self.sigma is not None else self.mu / 3
        beta = self.beta if self.beta is not None else sigma / 2
        p = self.draw_probability
        if p is None:
            drawn = np.asarray(games["drawn"], dtype=bool) if len(games) else np.zeros(0, bool)
            p = min(float(drawn.mean()), _MAX_DRAW_PROBABILITY) if len(drawn) else 0.0
        return TrueSkillEnv(mu=self.mu, sigma=sigma, beta=beta, tau=self.tau, draw_probability=p)

    def record(self, env: TrueSkillEnv) -> dict:
        """The settings as summary.json records them: values used and where each came from."""
        return {
            "mu": env.mu,
            "sigma": env.sigma,
            "beta": env.beta,
            "tau": env.tau,
            "draw_probability": env.draw_probability,
            "draw_probability_source": ("observed tie rate" if self.draw_probability is None else "given"),
        }


DEFAULT_TRUESKILL = TrueSkillSettings()
