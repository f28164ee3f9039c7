"""Live chat's and the rating protocol's comparisons for the stopping rule: on the real Ji et al. run they
are within-HIT slider differences of the HITs that pass their own QC (and the earlier asymptotic
statistic is still the paper's overall-z differences); a clearly better system wins; the modules load no
scipy."""

from __future__ import annotations

import random
import subprocess
import sys
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hitkit.analysis.sequential import intervals, settle
from hitkit.analysis.tables import counted
from hitkit.protocols.live_chat import sequential as live_chat
from hitkit.protocols.live_chat.analysis import read_tables
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA as CHAT_CRITERIA
from hitkit.protocols.live_chat.steps import RatingChoices
from hitkit.protocols.rating import sequential as rating
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA as DA_CRITERIA

REPO = Path(__file__).resolve().parents[1]
JI = REPO / "tests" / "data" / "ji2022-run1"  # shipped with the tests (MIT), as ../shared/data/ji2022-run1
PAPER_Z = {
    "A": 0.534,
    "B": 0.419,
    "A_p": 0.318,
    "C": 0.262,
    "C_p": 0.189,
    "B_p": 0.173,
    "D": -0.087,
    "D_p": -0.201,
    "E_p": -0.217,
    "E": -0.243,
}
needs_ji = pytest.mark.skipif(not JI.is_dir(), reason="the Ji et al. run is not in tests/data")


@pytest.fixture(scope="module")
def ji():
    every, ratings = read_tables(JI)
    return every, ratings


def _plan(systems, n):
    return {pair: float(n) for pair in combinations(sorted(systems), 2)}


@needs_ji
def test_the_asymptotic_comparisons_are_the_papers_overall_z_differences(ji):
    every, ratings = ji
    found = live_chat.asymptotic_comparisons(every, ratings, list(PAPER_Z), _plan(PAPER_Z, 304), CHAT_CRITERIA)
    steps = RatingChoices(significance_unit="rating", correction="holm").scored(counted(every), ratings, CHAT_CRITERIA)
    z = dict(zip(steps.systems["system"], steps.systems["z"]))
    assert len(found) == 45
    for c in found:
        assert c.estimate == pytest.approx(z[c.a] - z[c.b], abs=1e-12)
        assert c.estimate == pytest.approx(PAPER_Z[c.a] - PAPER_Z[c.b], abs=0.0011)  # the paper rounds to 3 places
        assert c.n == 304 and c.variance > 0 and c.planned == 304 and c.null == 0 and not c.exact
    assert {(c.a, c.b) for c in found} == set(combinations(sorted(PAPER_Z), 2))


@needs_ji
def test_live_chat_comparisons_are_within_hit_differences_of_hits_that_pass_their_own_qc(ji):
    every, ratings = ji
    found = {
        (c.a, c.b): c
        for c in live_chat.comparisons({"assignments": every, "ratings": ratings}, list(PAPER_Z), _plan(PAPER_Z, 304))
    }
    # By hand for A vs E: oriented sliders, each HIT's QC test on its own ratings, the HITs holding both,
    # then each worker's first such HIT in the assignments' order (a returning worker adds no observation)
    one = reverse = ratings.copy()
    negative = {c.name for c in CHAT_CRITERIA if c.polarity == "negative"}
    reverse["oriented"] = np.where(one["criterion"].isin(negative), 100 - one["score"], one["score"])
    qc = {c.name for c in CHAT_CRITERIA if c.qc}
    diffs = []
    from scipy import stats

    for _hit, own in reverse.groupby("assignment_id", sort=False):
        test = own[own["criterion"].isin(qc)]
        control, real = test.loc[test["is_control"], "oriented"], test.loc[~test["is_control"], "oriented"]
        if not len(control) or stats.mannwhitneyu(control, real, alternative="less").pvalue >= 0.05:
            continue
        conv = (
            own[~own["is_control"]]
            .groupby(["conversation_id"])
            .agg(system=("system", "first"), score=("oriented", "mean"))
        )
        per = conv.groupby("system")["score"].mean()
        if "A" in per and "E" in per:
            diffs.append((str(_hit), own["worker_id"].iloc[0], (per["A"] - per["E"]) / 100))
    rank = {a: i for i, a in enumerate(every["assignment_id"].astype(str))}
    first: dict = {}
    for _, worker, d in sorted(diffs, key=lambda row: rank[row[0]]):
        first.setdefault(worker, d)
    assert len(first) < len(diffs)  # the run has returning workers: their later HITs are left out
    diffs = list(first.values())
    c = found[("A", "E")]
    assert c.n == len(diffs) and 30 < c.n < 120 and c.estimate == pytest.approx(np.mean(diffs))
    assert sorted(c.clusters) == pytest.approx(sorted(diffs)) and c.bounds == (-1.0, 1.0) and c.null == 0
    assert c.estimate > 0  # the paper's best system over its worst, within the HITs holding both
    assert all(f.clusters is not None for f in found.values())


def _chat_tables(hits: int, quality: dict[str, float], seed: int = 0):
    """Export-shaped live-chat tables: every HIT one worker, every system once plus the control bot."""
    rng = random.Random(seed)
    assignments, ratings = [], []
    for h in range(hits):
        ids = {"study": "s", "hit_id": f"h{h}", "assignment_id": f"a{h}", "worker_id": f"w{h}"}
        assignments.append({**ids, "status": "submitted", "work_time_s": 60})
        for slot, (system, q) in enumerate(quality.items()):
            for c in CHAT_CRITERIA:
                agree = min(100, max(0, round(q + rng.gauss(0, 10))))
                ratings.append(
                    {
                        **ids,
                        "conversation_id": f"c{h}-{slot}",
                        "slot": slot,
                        "system": system,
                        "is_control": int(system == "qc"),
                        "criterion": c.name,
                        "score": agree if c.polarity == "positive" else 100 - agree,
                    }
                )
    return {"assignments": pd.DataFrame(assignments), "ratings": pd.DataFrame(ratings)}


def test_a_clearly_better_system_wins_in_live_chat():
    tables = _chat_tables(30, {"A": 85, "B": 50, "C": 50, "qc": 10})
    found = intervals(live_chat.comparisons(tables, ["A", "B", "C"], _plan("ABC", 30)), alpha=0.05)
    winners = {(i.a, i.b): i.winner for i in found}
    assert winners == {("A", "B"): "A", ("A", "C"): "A", ("B", "C"): None}
    assert all(i.n == 30 for i in found)
    assert settle(found, "best", ["A", "B", "C"]).leader == "A"


def test_a_hit_that_fails_its_own_qc_adds_no_observation():
    tables = _chat_tables(20, {"A": 70, "B": 50, "qc": 10})
    flat = _chat_tables(1, {"A": 30, "B": 30, "qc": 80}, seed=1)  # the control rated above the rest: fails
    flat = {k: v.replace({"a0": "x0", "w0": "x0", "h0": "xh0"}) for k, v in flat.items()}
    both = {k: pd.concat([tables[k], flat[k]], ignore_index=True) for k in tables}
    before = live_chat.comparisons(tables, ["A", "B"], _plan("AB", 21))[0]
    after = live_chat.comparisons(both, ["A", "B"], _plan("AB", 21))[0]
    assert after.n == before.n == 20 and after.clusters == before.clusters


def test_a_pairs_horizon_is_its_planned_size_less_the_hits_that_fail_qc():
    # 20 HITs that pass and 10 whose control is rated above the rest (they fail): 10 passing pseudo-HITs
    # added, the share is 30 / 40; a pair planned at 60 HITs has spent 30 of them for its 20 observations
    # and expects 20 + 30 × 3/4 by the end
    good = _chat_tables(20, {"A": 70, "B": 50, "qc": 10})
    bad = _chat_tables(10, {"A": 30, "B": 30, "qc": 80}, seed=1)
    bad = {k: v.replace({f"{x}{h}": f"f{x}{h}" for x in ("a", "w", "h") for h in range(10)}) for k, v in bad.items()}
    both = {k: pd.concat([good[k], bad[k]], ignore_index=True) for k in good}
    found = live_chat.comparisons(both, ["A", "B"], _plan("AB", 60))[0]
    assert found.n == 20 and found.expected == pytest.approx(20 + 30 * 30 / 40) and found.horizon == found.expected
    assert live_chat.comparisons(good, ["A", "B"], _plan("AB", 60))[0].expected == 60  # every HIT passes
    assert live_chat.comparisons(good, ["A", "B"], _plan("AB", 20))[0].expected == 20  # the design is done
    assert (
        live_chat.comparisons({"assignments": pd.DataFrame(), "ratings": pd.DataFrame()}, ["A", "B"], {})[0].expected
        is None
    )


def test_a_pair_whose_hits_fail_qc_is_futile_at_its_expected_size_not_its_planned_one():
    rng = np.random.default_rng(11)
    x = tuple(np.clip(rng.normal(0.13, 0.2, 44), -1, 1))  # a difference not yet settled, 44 HITs: all there will be
    planned = live_chat.Comparison(
        "a", "b", 44, float(np.mean(x)), float(np.var(x, ddof=1)), 66.0, clusters=x, bounds=(-1.0, 1.0)
    )
    expected = live_chat.Comparison(**{**planned.__dict__, "expected": 44.0})
    waiting, done = intervals([planned], 0.05)[0], intervals([expected], 0.05)[0]
    assert waiting.winner is None and not waiting.futile  # 22 more HITs planned: it might still settle
    assert done.futile and done.settled  # none to come: its interval is its last


def test_no_ratings_yet_gives_empty_comparisons():
    found = live_chat.comparisons({"assignments": pd.DataFrame(), "ratings": pd.DataFrame()}, ["B", "A"], {})
    assert [(c.a, c.b, c.n) for c in found] == [("A", "B", 0)]
    assert intervals(found, 0.05)[0].winner is None


def test_a_clearly_better_system_wins_in_rating():
    rng = random.Random(3)
    rows, assignments = [], []
    quality = {"A": 85, "B": 50, "C": 50}
    for h in range(24):
        ids = {"study": "s", "hit_id": f"h{h}", "assignment_id": f"a{h}", "worker_id": f"w{h}"}
        assignments.append({**ids, "status": "approved", "work_time_s": 60})
        for item in range(3):
            for system, q in quality.items():
                for control in (0, 1) if item == 0 else (0,):
                    for c in DA_CRITERIA:
                        agree = min(100, max(0, round((5 if control else q) + rng.gauss(0, 10))))
                        rows.append(
                            {
                                **ids,
                                "item_id": f"p{item}",
                                "system": system,
                                "is_control": control,
                                "position": 0,
                                "criterion": c.name,
                                "score": agree if c.polarity == "positive" else 100 - agree,
                            }
                        )
    tables = {"assignments": pd.DataFrame(assignments), "da_ratings": pd.DataFrame(rows)}
    found = intervals(rating.comparisons(tables, ["A", "B", "C"], _plan("ABC", 24)), alpha=0.05)
    assert {(i.a, i.b): i.winner for i in found} == {("A", "B"): "A", ("A", "C"): "A", ("B", "C"): None}
    assert all(i.n == 24 for i in found)


def test_planned_sizes_and_the_pairs_a_hit_informs():
    chat = [{"system": s, "is_control": s == "qc", "slot": n} for s in ("A", "B", "C", "qc") for n in range(4)]
    # 4 HITs of 3 real slots from 3 systems: every HIT holds every pair
    assert live_chat.planned(chat, None) == {("A", "B"): 4.0, ("A", "C"): 4.0, ("B", "C"): 4.0}
    # 2 real slots a HIT from 3 systems: a third of the HITs hold a given pair
    two = [p for p in chat if p["system"] != "C"] + [p for p in chat if p["system"] == "qc"][:0]
    assert live_chat.planned(two + [{"system": "C", "is_control": False}], None)[("A", "B")] == pytest.approx(
        4 * (9 / 4) * (5 / 4) / 6
    )
    assert live_chat.hit_pairs([chat[0]]) == []
    assert live_chat.hit_pairs([chat[0], chat[5], chat[9], chat[12]]) == [("A", "B"), ("A", "C"), ("B", "C")]
    assert live_chat.hit_pairs([chat[4], chat[8], chat[12]]) == [("B", "C")]
    da = [{"item_id": f"p{i}", "system": s, "is_control": False} for i in range(5) for s in ("A", "B")]
    da += [{"is_control": True, "slot": n} for n in range(2)]
    config = SimpleNamespace(rating=SimpleNamespace(items_per_hit=4, ratings_per_item=3))
    assert rating.planned(da, config) == {("A", "B"): 9.0}  # 10 responses → 3 HITs × 3 workers, all hold both
    assert rating.hit_pairs([da[0], da[1], da[-1]]) == [("A", "B")] and rating.hit_pairs([da[-1]]) == []
    assert rating.UNIT == "workers" and live_chat.UNIT == "workers"


def test_the_comparison_modules_load_no_statistics():
    code = (
        "import sys\nimport hitkit.protocols.live_chat.sequential\nimport hitkit.protocols.rating.sequential\n"
        "print('scipy' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


@needs_ji
def test_the_replays_vectorised_rule_equals_intervals_and_settle(ji):
    import importlib.util

    spec = importlib.util.spec_from_file_location("replay_ji", REPO / "benchmarks" / "replay_ji.py")
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    every, ratings = ji
    # each worker's first HIT only: the replay counts HITs, the rule workers, and with one HIT a worker
    # the two agree in every order
    assignments = counted(every).drop_duplicates("worker_id")
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    systems = sorted(PAPER_Z)
    hits, obs = replay.observations(assignments, ratings, systems)
    held, passed, holds = replay.design(ratings, systems, hits, obs)
    plan = {pair: 40.0 for pair in obs}
    position = np.empty(len(hits), dtype=int)
    position[np.random.default_rng(4).permutation(len(hits))] = np.arange(len(hits))
    run = replay.run_order(position, obs, plan, held, passed, holds)
    for look in (60, 200, len(hits) - 1):
        # the library's comparisons of the HITs so far, horizon included (live chat's own code)
        so_far = {h for h, p in zip(hits, position) if p <= look}
        mine = ratings[ratings["assignment_id"].astype(str).isin(so_far)]
        order = sorted(so_far, key=lambda h: position[hits.index(h)])
        comparisons = live_chat.rated_comparisons(
            assignments.set_index(assignments["assignment_id"].astype(str)).loc[order].reset_index(drop=True),
            mine,
            systems,
            plan,
            CHAT_CRITERIA,
        )
        found = intervals(comparisons, 0.05)
        want = [1 if i.winner == i.a else (-1 if i.winner else 0) for i in found]
        assert list(run["winner"][look]) == want, look
        assert list(run["settled"][look]) == [i.settled or i.undecided for i in found], look
        assert bool(run["settled"][look].all()) == settle(found, "clear", systems).fired
