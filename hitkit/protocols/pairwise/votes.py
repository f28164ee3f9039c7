"""Pairwise A/B's vocabulary: the votes table's columns and the answers a vote takes.

Free of numpy and scipy, so the web tier imports it cheaply.
"""

from __future__ import annotations

VOTE_COLUMNS = ("study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a", "system_b", "vote")
VOTES = ("a", "b", "tie")
