"""Each arena worker's QC verdict, from both tests, and the warnings a small arena owes its reader.

Two tests judge an arena worker (pure functions of their tables):

- the control-battle test (``qc_table`` of the analysis): do the worker's votes in QC battles prefer the
  real system over the QC bot (one-sided binomial, judged from enough decisive QC votes);
- the voter test (:func:`hitkit.protocols.arena.voters.voter_table`): do their ordinary votes look like a
  random, side-, tie- or length-biased voter's rather than an honest one's (an anytime-valid e-value).

:func:`verdicts` combines them: **failed** when either test says so (flagged by the voter test, or judged
and not passed by the control test), **passed** when neither does and at least one of them could have
(the control test judged the worker, or the voter test had the power to flag each kind of bad voter on
their battles), and **not judged** otherwise: too few votes to tell, never "passed".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.analysis.inference import duplicate_warnings
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES
from hitkit.protocols.arena.voters import reason as flag_reason

PASSED, FAILED, NOT_JUDGED = "passed", "failed", "not judged"
QC_COLUMNS = (
    "worker_id",
    "status",
    "reason",
    "votes",
    "e_value",
    "alternative",
    "control_battles",
    "real_wins",
    "control_wins",
    "ties",
    "p_value",
    "judged",
    "passed",
)
"""``qc.csv``: every worker with a vote (docs/COLUMNS.md)."""
DOMINANT_SHARE = 0.5
"""A leaderboard where one worker cast more than this share of the votes says so."""
LIVE_BOOT = 100
"""Bootstrap rounds of the dashboard's live leaderboard check (:func:`live_warnings`)."""
LIVE_BOOT_BATTLES = 20_000
"""Above this many battles the live check skips the intervals (a ranking that large is informative)."""
UNINFORMATIVE = 1.0
"""The ranking is "not yet informative" when the median interval width exceeds this × the spread of ratings."""


def verdicts(workers: list[str], control: pd.DataFrame, voters: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """One row per worker of ``workers`` (:data:`QC_COLUMNS`) from the control-battle test's table
    ``control`` (any workers, possibly none) and the voter test's ``voters`` (``alpha`` its false-flag rate)."""
    table = pd.DataFrame({"worker_id": sorted(set(map(str, workers)))})
    ctl = control.assign(worker_id=control["worker_id"].astype(str)).set_index("worker_id")
    vot = voters.assign(worker_id=voters["worker_id"].astype(str)).set_index("worker_id")
    table = table.join(vot[["votes", "e_value", "alternative", "vote_judged", "flagged"]], on="worker_id")
    table = table.join(
        ctl[["control_battles", "real_wins", "control_wins", "ties", "p_value", "judged", "passed"]].rename(
            columns={"judged": "control_judged", "passed": "control_passed"}
        ),
        on="worker_id",
    )
    # A worker without leaderboard votes has no evidence against them (e = 1); one without QC battles
    # has the binomial test's p = 1 (no decisive QC vote).
    for column, empty in (("votes", 0), ("e_value", 1.0), ("control_battles", 0), ("real_wins", 0)):
        table[column] = pd.to_numeric(table[column]).fillna(empty)
    for column, empty in (("control_wins", 0), ("ties", 0), ("p_value", 1.0)):
        table[column] = pd.to_numeric(table[column]).fillna(empty)
    table["alternative"] = table["alternative"].where(table["alternative"].notna(), "")
    flagged = table["flagged"].eq(True).to_numpy()
    vote_judged = table["vote_judged"].eq(True).to_numpy()
    control_judged = table["control_judged"].eq(True).to_numpy()
    control_failed = control_judged & ~table["control_passed"].eq(True).to_numpy()
    failed = flagged | control_failed
    passed = ~failed & (control_judged | vote_judged)
    table["status"] = np.where(failed, FAILED, np.where(passed, PASSED, NOT_JUDGED))
    table["vote_judged"], table["control_judged"] = vote_judged, control_judged
    columns = ["status", "flagged", "alternative", "e_value", "votes", "real_wins", "control_wins", "p_value"]
    table["reason"] = [
        _reason(row, alpha) for row in table[[*columns, "vote_judged", "control_judged"]].itertuples(index=False)
    ]
    table["judged"] = table["status"] != NOT_JUDGED
    table["passed"] = pd.Series(
        [s == PASSED if s != NOT_JUDGED else pd.NA for s in table["status"]], index=table.index, dtype="boolean"
    )
    ints = ("votes", "control_battles", "real_wins", "control_wins", "ties")
    return table.astype({c: int for c in ints})[list(QC_COLUMNS)]


def _reason(row, alpha: float) -> str:
    status, flagged, alternative, e_value, votes, real, bot, p, vote_judged, control_judged = row
    if status == FAILED and flagged:
        return flag_reason(alternative, e_value, alpha)
    if status == FAILED:
        return f"voted for the QC bot {int(bot)} times and for the real system {int(real)} (binomial p = {p:.3g})"
    if status == PASSED:
        parts = [f"votes look like an honest voter's (e-value {e_value:.3g})"] if vote_judged else []
        if control_judged:
            parts.append(f"prefers the real system over the QC bot (binomial p = {p:.3g})")
        return "; ".join(parts)
    return (
        f"too few votes to judge ({int(votes)} leaderboard vote(s), {int(real + bot)} decisive QC vote(s))"
        if votes or real + bot
        else "no votes to judge"
    )


def uninformative(board: pd.DataFrame, style: bool) -> str | None:
    """A warning when the leaderboard's intervals are wider than the spread of its ratings (the median
    width over the systems exceeds :data:`UNINFORMATIVE` × max − min rating), else None."""
    column = "rating_style" if style else "rating"
    lower, upper = board[f"{column}_lower"].to_numpy(float), board[f"{column}_upper"].to_numpy(float)
    rating = board[column].to_numpy(float)
    if len(board) < 2 or np.isnan(lower).all() or np.isnan(rating).all():
        return None
    width = float(np.nanmedian(upper - lower))
    spread = float(np.nanmax(rating) - np.nanmin(rating))
    if width <= UNINFORMATIVE * spread:
        return None
    return (
        f"the ranking is not yet informative: the median 95 % interval is {width:.0f} points wide, wider than "
        f"the {spread:.0f} points between the best and worst rating; collect more battles before reading an order"
    )


def board_warnings(counted: pd.DataFrame, board: pd.DataFrame, facts: dict, cluster: str = "worker") -> list[str]:
    """What a reader of the leaderboard of ``counted`` battles must know (the same lines in ``hitkit
    analyze``, ``launch``, the report and the dashboard): unconnected groups of systems, no style counts,
    a dominant worker, intervals too wide for a ranking."""
    lines = []
    if facts["components"] > 1:
        lines.append(
            f"the systems fall into {facts['components']} groups that no chain of battles connects; "
            "ratings of different groups are not comparable and no rank orders them (see 'component')"
        )
    if not facts["style_control"]:
        lines.append("some battles have no style counts, so there is no style-controlled rating")
    share = float(counted["worker_id"].value_counts(normalize=True).iloc[0])
    if share > DOMINANT_SHARE and cluster == "worker":
        lines.append(
            f"one worker cast {share:.0%} of the leaderboard's votes; the worker-clustered intervals "
            "account for it, but the leaderboard mostly says what that worker prefers"
        )
    vague = uninformative(board, facts["style_control"])
    if vague:
        lines.append(vague)
    return lines


def live_warnings(battles: pd.DataFrame, *, seed: int = 0) -> list[str]:
    """:func:`board_warnings` of a running study's battles so far, for the dashboard: the leaderboard with
    :data:`LIVE_BOOT` bootstrap rounds (none above :data:`LIVE_BOOT_BATTLES` battles)."""
    from hitkit.protocols.arena.leaderboard import leaderboard
    from hitkit.protocols.arena.reading import included

    counted = included(battles.assign(worker_id=battles["worker_id"].astype(str)))
    if counted.empty:
        return []
    n_boot = LIVE_BOOT if len(counted) <= LIVE_BOOT_BATTLES else 0
    board, _, facts = leaderboard(counted, n_boot=n_boot, seed=seed)
    return board_warnings(counted, board, facts)


def summary_warnings(
    battles: pd.DataFrame,
    counted: pd.DataFrame,
    board: pd.DataFrame,
    facts: dict,
    cluster: str,
    leaks_left_out: int,
    skipped: list[str],
) -> list[str]:
    """The summary's warnings: repeated votes and assignments, the identity leaks left out, the
    leaderboard's own (:func:`board_warnings`) and the categories without a leaderboard."""
    lines = duplicate_warnings(
        [
            ("battle vote(s) (assignment, battle)", battles.attrs.get("duplicates") or None),
            (ASSIGNMENT_DUPLICATES, battles.attrs.get("assignment_duplicates")),
        ]
    )
    if leaks_left_out:
        lines.append(
            f"{leaks_left_out} battle(s) flagged as identity leaks are left out of the leaderboard "
            "(--include-leaks counts them)"
        )
    lines += board_warnings(counted, board, facts, cluster)
    if skipped:
        lines.append(
            "categories without a leaderboard of their own (fewer than 20 battles or 2 systems): " + ", ".join(skipped)
        )
    return lines
