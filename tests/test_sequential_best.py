"""hitkit.analysis.sequential's "best" decision keeps a pair open until the leader itself has won it."""

from __future__ import annotations

from hitkit.analysis.sequential import Interval, settle


def interval(a: str, b: str, winner: str | None) -> Interval:
    low, high = {a: (0.55, 0.65), b: (0.35, 0.45), None: (0.45, 0.55)}[winner]
    return Interval(a, b, 100, (low + high) / 2, low, high, 0.5)


def test_a_challenger_beaten_by_a_third_system_stays_open_against_the_leader():
    # B beat A and A beat C, so B is the only system not beaten; B has not met C decisively yet.
    found = [interval("A", "B", "B"), interval("A", "C", "A"), interval("B", "C", None)]
    state = settle(found, "best", ["A", "B", "C"])
    assert not state.fired and state.leader == "B"
    assert state.open == [("B", "C")] and list(state.weights) == [("B", "C")]
    found[2] = interval("B", "C", "B")
    assert settle(found, "best", ["A", "B", "C"]).fired
