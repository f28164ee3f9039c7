"""The rating protocol's observations for ``hitkit replay``: live chat's (:func:`hitkit.protocols.live_chat.replay.rated_replay`)
on ``da_ratings`` in live chat's shape, a rated response in a conversation's place, each counted
assignment (one worker's block) the unit, as the stopping rule's
:func:`~hitkit.protocols.rating.sequential.comparisons` takes them."""

from __future__ import annotations

from pathlib import Path

from hitkit.analysis.replay_data import ReplayData
from hitkit.analysis.tables import read_frame
from hitkit.protocols.live_chat.replay import rated_replay
from hitkit.protocols.rating.analysis import read_da_ratings
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA, TABLE


def replay_data(in_dir: str | Path, config=None) -> ReplayData:
    """The study folder's rated assignments and pairs, on the study file's criteria (``config``) or the defaults."""
    criteria = config.rating.criterion_list() if config is not None and config.rating else DEFAULT_CRITERIA
    ratings = read_da_ratings(in_dir, criteria)
    return rated_replay("rating", in_dir, ratings, criteria, {TABLE: read_frame(in_dir, TABLE)})
