"""Live chat + Direct Assessment analysis (METHODS §1): the paper's figures, hand-worked cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hitkit.analysis.inference import DuplicateRowsWarning
from hitkit.errors import ConfigError, InputError
from hitkit.protocols.live_chat.analysis import analyze_live_chat
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion
from hitkit.protocols.live_chat.quality import reverse_negative, standardise_per_worker, wilcoxon_qc
from hitkit.protocols.live_chat.reading import read_ratings
from hitkit.protocols.live_chat.scores import pairwise_significance, replication, system_scores

SHARED_RUN = Path(__file__).resolve().parent / "data" / "ji2022-run1"  # shipped with the tests (MIT, see its README)
NAMES = [c.name for c in DEFAULT_CRITERIA]
POSITIVE = [c.name for c in DEFAULT_CRITERIA if c.polarity == "positive"]


# ---------------------------------------------------------------- building small studies


def conversation(assignment: str, worker: str, slot: int, system: str, scores: dict) -> list[dict]:
    """Rating rows of one conversation; ``scores`` maps criterion → raw score as entered."""
    return [
        dict(
            study="s",
            hit_id=f"h-{assignment}",
            assignment_id=assignment,
            worker_id=worker,
            conversation_id=f"{assignment}-{slot}",
            slot=slot,
            system=system,
            is_control=int(system == "qc"),
            criterion=name,
            score=score,
        )
        for name, score in scores.items()
    ]


def hit(assignment: str, worker: str, per_system: dict[str, dict]) -> list[dict]:
    """Rating rows of one HIT: ``per_system`` maps system (``qc`` = control) → scores."""
    rows = []
    for slot, (system, scores) in enumerate(per_system.items()):
        rows += conversation(assignment, worker, slot, system, scores)
    return rows


def flat(value: float, negative: float | None = None) -> dict:
    """Scores of one conversation: ``value`` on positive criteria, ``negative`` on the others."""
    neg = 100 - value if negative is None else negative
    return {n: (value if n in POSITIVE else neg) for n in NAMES}


def write_study(folder: Path, ratings: list[dict], assignments: list[dict] | None = None, minutes: float = 30) -> Path:
    """Write ratings.csv and assignments.csv (one submitted row per rated assignment by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(ratings)
    if assignments is None:
        assignments = [
            dict(study="s", hit_id=f"h-{a}", assignment_id=a, worker_id=w, status="submitted", work_time_s=minutes * 60)
            for a, w in table[["assignment_id", "worker_id"]].drop_duplicates().itertuples(index=False)
        ]
    table.to_csv(folder / "ratings.csv", index=False)
    pd.DataFrame(assignments).to_csv(folder / "assignments.csv", index=False)
    return folder


def diligent(assignment: str, worker: str, levels: dict[str, float], shift: float = 0) -> list:
    """A HIT whose worker rates the QC bot lowest and each system at its level (plus shift)."""
    per = {"qc": flat(5 + shift)}
    for i, (system, level) in enumerate(levels.items()):
        per[system] = {n: level + shift + j * 0.5 + i * 0.1 for j, n in enumerate(NAMES)}
    return hit(assignment, worker, per)


LEVELS = {"good": 80, "mid": 55, "bad": 30, "worse": 20, "worst": 12}


# ---------------------------------------------------------------- the paper's run


@pytest.fixture(scope="module")
def paper_run():
    # Ji et al.'s own test (one-sided Mann-Whitney per rating), as reproducing the paper asks for it
    return analyze_live_chat(SHARED_RUN, replicate_dir=SHARED_RUN, significance_unit="rating")


def test_paper_workers_and_pass_rate(paper_run):
    s = paper_run.summary
    assert (s["workers"], s["passed"], round(s["pass_rate"], 3)) == (249, 173, 0.695)
    workers = paper_run.tables["workers"]
    assert len(workers) == 249 and workers["worker_id"].is_unique
    assert s["hits"] == 305 and s["hits_passed"] == workers.loc[workers.passed, "assignments"].sum()
    # the empty submission's worker is counted and fails
    assert workers["p_value"].isna().sum() == 2  # the empty one and the one with σ = 0
    assert not workers.loc[workers["p_value"].isna(), "passed"].any()


def test_paper_overall_z_per_system(paper_run):
    systems = paper_run.tables["systems"].set_index("system")
    expected = {
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
    assert systems["z"].round(3).to_dict() == expected
    assert list(systems.index) == list(expected)  # sorted by z, the control left out
    assert list(systems["rank"]) == list(range(1, 11))
    assert systems.loc["A", "n"] == 798


def test_paper_model_a_per_criterion(paper_run):
    a = paper_run.tables["systems"].set_index("system").loc["A"]
    expected = {
        "interesting": 0.564,
        "fun": 0.602,
        "consistent": 0.711,
        "fluent": 0.863,
        "topic": 0.964,
        "robotic": -0.038,
        "repetitive": 0.069,
    }
    assert {k: round(float(a[k]), 3) for k in expected} == expected


def test_paper_significance_and_self_replication(paper_run, tmp_path):
    sig = paper_run.tables["significance"]
    assert len(sig) == 10 * 9
    p = sig.set_index(["system_a", "system_b"])["p_value"]
    assert p[("A", "E")] < 1e-10 and p[("E", "A")] > 0.99
    rep = paper_run.tables["replication"]
    assert list(rep["criterion"]) == ["overall", *NAMES]
    assert np.allclose(rep[["pearson", "spearman", "kendall"]], 1.0)
    assert (rep["n_systems"] == 10).all()
    written = {p.name for p in paper_run.write(tmp_path)}
    assert {
        "workers.csv",
        "systems.csv",
        "significance.csv",
        "replication.csv",
        "summary.json",
        "significance.png",
    } <= written
    assert (tmp_path / "significance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "summary.json").read_text())["passed"] == 173
    # Fisher-z interval of r: degenerate at r = 1.
    assert np.allclose(rep[["pearson_low", "pearson_high"]], 1.0)


def test_paper_run_intervals_and_corrected_significance(paper_run):
    intervals = paper_run.tables["score_intervals"]
    assert len(intervals) == 10 * 8 and (intervals["unit"] == "worker").all()
    overall = intervals[intervals["criterion"] == "overall"].set_index("system")
    systems = paper_run.tables["systems"].set_index("system")
    np.testing.assert_allclose(overall["score"], systems.loc[overall.index, "z"])
    assert ((overall["low"] < overall["score"]) & (overall["score"] < overall["high"])).all()
    # A (0.534) and D (−0.087) are far apart; A and B (0.419) overlap.
    assert overall.loc["A", "low"] > overall.loc["D", "high"]
    assert overall.loc["A", "low"] < overall.loc["B", "high"]
    sig = paper_run.tables["significance"]
    np.testing.assert_allclose(sig["p_adjusted"], np.minimum(1, 90 * sig["p_value"]))
    assert paper_run.summary["multiple_comparisons"] == "bonferroni"
    # Resampling single ratings pretends the 7 ratings of a chat and a worker's many chats are
    # independent: narrower intervals than resampling workers.
    naive = analyze_live_chat(SHARED_RUN, interval_unit="rating", n_boot=300, significance_unit="rating")

    def width(t):
        t = t[t["criterion"] == "overall"]
        return float((t["high"] - t["low"]).mean())

    assert width(naive.tables["score_intervals"]) < 0.8 * width(intervals)


# ---------------------------------------------------------------- steps, by hand


def test_default_criteria_follow_methods_table():
    assert NAMES == ["robotic", "interesting", "fun", "consistent", "fluent", "repetitive", "topic"]
    assert {c.name for c in DEFAULT_CRITERIA if c.polarity == "negative"} == {"robotic", "repetitive"}
    assert all(c.qc == (c.polarity == "positive") for c in DEFAULT_CRITERIA)
    assert DEFAULT_CRITERIA[-1].statement == "The chatbot stays on topic."


def test_criterion_config_is_checked():
    with pytest.raises(ConfigError, match="polarity"):
        Criterion("odd", "neutral", "x", qc=False)
    with pytest.raises(ConfigError, match="reserved"):
        Criterion("rank", "positive", "x", qc=True)
    with pytest.raises(ConfigError, match="qc=True"):
        read_ratings(".", [Criterion("a", "positive", "x", qc=False)])


def test_reverse_negative_flips_only_negative_criteria():
    ratings = pd.DataFrame({"criterion": ["robotic", "fun", "repetitive"], "score": [30.0, 30, 0]})
    out = reverse_negative(ratings)
    assert list(out["oriented"]) == [70, 30, 100]
    assert list(out["score"]) == [30, 30, 0]  # the raw score is kept as entered
    with pytest.raises(ValueError, match="boring"):
        reverse_negative(pd.DataFrame({"criterion": ["boring"], "score": [1.0]}))


def test_standardise_per_worker_by_hand():
    ratings = pd.DataFrame({"worker_id": ["a"] * 3 + ["b"] * 4, "oriented": [10.0, 20, 30, 0, 0, 50, 50]})
    z = standardise_per_worker(ratings)["z"]
    # a: μ 20, σ (ddof 1) 10; b: μ 25, σ √(4·625/3) → ±√3/2
    h = math.sqrt(3) / 2
    assert np.allclose(z, [-1, 0, 1, -h, -h, h, h])
    assert np.allclose(standardise_per_worker(ratings, ddof=0)["z"][:3], [-1.2247449, 0, 1.2247449])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 100).map(lambda v: round(v, 2)), min_size=2, max_size=30))
def test_standardised_scores_have_mean_0_and_sd_1(values):
    ratings = pd.DataFrame({"worker_id": "w", "oriented": values})
    z = standardise_per_worker(ratings)["z"]
    if np.ptp(values) == 0:
        assert z.isna().all()
    else:
        assert abs(z.mean()) < 1e-9 and abs(z.std(ddof=1) - 1) < 1e-9


def test_worker_rating_qc_lowest_passes_with_the_exact_p(tmp_path):
    levels = {s: 20 + 10 * i for i, s in enumerate(["s1", "s2", "s3", "s4", "s5"])}
    study = write_study(tmp_path, diligent("a1", "w1", levels))
    workers = analyze_live_chat(study, qc_method="exact").tables["workers"]
    # 5 QC z (positive criteria) all below 25 system z: exact p = 1 / C(30, 5)
    assert workers.loc[0, "p_value"] == pytest.approx(1 / math.comb(30, 5))
    assert workers.loc[0, "passed"]
    assert analyze_live_chat(study).tables["workers"].loc[0, "passed"]


def test_worker_rating_qc_highest_or_constant_fails(tmp_path):
    systems = {s: flat(20 + i) for i, s in enumerate("vwxyz")}
    rows = hit("a1", "contrary", {"qc": flat(95), **systems})
    rows += hit("a2", "flat", {s: flat(50, negative=50) for s in ["qc", *"vwxyz"]})  # σ = 0
    rows += diligent("a3", "ok", LEVELS)
    result = analyze_live_chat(write_study(tmp_path, rows))
    workers = result.tables["workers"].set_index("worker_id")
    assert workers.loc["contrary", "p_value"] > 0.99 and not workers.loc["contrary", "passed"]
    assert math.isnan(workers.loc["flat", "p_value"]) and not workers.loc["flat", "passed"]
    assert workers.loc["flat", "sd_raw"] == 0
    assert workers.loc["ok", "passed"]
    assert result.summary["passed"] == 1 and result.summary["workers"] == 3


def test_qc_compares_on_qc_criteria_only():
    # QC bot rated low on the positives but "not robotic at all" (raw 0 → reversed 100)
    per = {"qc": flat(10, negative=0), **{s: flat(60, negative=90) for s in "vwxyz"}}
    z = standardise_per_worker(reverse_negative(pd.DataFrame(hit("a", "w", per))))
    z["is_control"] = z["is_control"].astype(bool)
    assert wilcoxon_qc(z).loc[0, "passed"]
    all_qc = [Criterion(c.name, c.polarity, c.statement, qc=True) for c in DEFAULT_CRITERIA]
    with_negatives = wilcoxon_qc(z, all_qc).loc[0]
    assert not with_negatives["passed"]
    assert (with_negatives["n_control"], with_negatives["n_system"]) == (7, 35)


def test_rejected_work_counts_and_an_exclusion_with_its_reason_does_not(tmp_path):
    rows = diligent("a1", "w1", LEVELS) + diligent("a2", "w2", LEVELS)
    rows += diligent("r1", "w1", LEVELS, shift=10)
    assignments = [
        dict(study="s", hit_id="h", assignment_id=a, worker_id=w, status=st_, work_time_s=t)
        for a, w, st_, t in [
            ("a1", "w1", "submitted", 600),
            ("a2", "w2", "approved", 1200),
            ("e1", "w4", "submitted", 60),  # the empty submission
            ("r1", "w1", "rejected", 60),
            ("r2", "w3", "returned", 0),
        ]
    ]
    result = analyze_live_chat(write_study(tmp_path, rows, assignments))
    workers = result.tables["workers"].set_index("worker_id")
    assert sorted(workers.index) == ["w1", "w2", "w4"]  # returned-only w3 does not count
    # A rejection is an outcome, not an input: w1's rejected HIT and its ratings count
    assert workers.loc["w1", "assignments"] == 2
    assert workers.loc["w1", "mean_raw"] > workers.loc["w2", "mean_raw"]
    assert not workers.loc["w4", "passed"] and workers.loc[["w1", "w2"], "passed"].all()
    s = result.summary
    assert (s["workers"], s["passed"], s["hits"], s["hits_passed"]) == (3, 2, 4, 3)
    # 600 s / 6 conversations = 1.667 min, 1200 s / 6 = 3.333 min, 60 s / 6 = 0.167 min; the empty one has none
    assert s["minutes_per_conversation_passed"] == pytest.approx((10 + 20 + 1) / 18)
    assert s["minutes_per_conversation_failed"] is None
    assert result.tables["systems"].set_index("system").loc["good", "n"] == 3 * 7
    # Excluded explicitly, with its reason, it does not
    (tmp_path / "exclusions.csv").write_text(
        "study,assignment_id,worker_id,reason\ns,r1,w1,rejected by the coordinator: copied another worker\n"
    )
    result = analyze_live_chat(tmp_path)
    workers = result.tables["workers"].set_index("worker_id")
    assert workers.loc["w1", "assignments"] == 1 and result.summary["hits"] == 3
    assert workers.loc["w1", "mean_raw"] == workers.loc["w2", "mean_raw"]
    (tmp_path / "exclusions.csv").write_text("study,assignment_id,worker_id,reason\ns,r1,w1,\n")
    with pytest.raises(InputError, match="exclusions.csv.*'r1' has no reason"):
        analyze_live_chat(tmp_path)


def test_system_scores_by_hand():
    kept = pd.DataFrame(
        {
            "system": ["x", "x", "x", "y", "y"],
            "conversation_id": ["1", "1", "2", "3", "3"],
            "criterion": ["fun", "robotic", "fun", "fun", "robotic"],
            "z": [1.0, 0.0, 2.0, -1.0, 0.5],
            "oriented": [80.0, 40, 90, 10, 60],
        }
    )
    table = system_scores(kept).set_index("system")
    assert table.loc["x", "n"] == 3 and table.loc["x", "z"] == pytest.approx(1.0)
    assert table.loc["x", "fun"] == pytest.approx(1.5) and table.loc["x", "robotic"] == 0
    assert table.loc["y", "z"] == pytest.approx(-0.25) and table.loc["y", "raw"] == 35
    assert table.loc["x", "rank"] == 1 and table.loc["y", "rank"] == 2
    assert math.isnan(table.loc["x", "topic"])  # configured but never rated


def test_control_and_failed_workers_stay_out_of_system_scores(tmp_path):
    rows = diligent("a1", "w1", LEVELS)
    rows += hit("a2", "bad", {"qc": flat(99), **{s: flat(1) for s in LEVELS}})
    systems = analyze_live_chat(write_study(tmp_path, rows)).tables["systems"]
    assert list(systems["system"]) == list(LEVELS)
    assert (systems["n"] == 7).all()


def test_pairwise_significance_direction_and_units():
    rng = np.random.default_rng(7)
    kept = pd.DataFrame(
        {
            "system": np.repeat(["hi", "lo", "mid"], 14),
            "conversation_id": np.repeat([f"c{i}" for i in range(6)], 7),
            "worker_id": np.tile(np.repeat(["w1", "w2"], 7), 3),
            "z": np.concatenate([rng.normal(1, 0.3, 14), rng.normal(-1, 0.3, 14), rng.normal(0, 0.3, 14)]),
        }
    )
    sig = pairwise_significance(kept, unit="rating").set_index(["system_a", "system_b"])["p_value"]
    assert len(sig) == 6
    assert sig[("hi", "lo")] < 0.001 and sig[("lo", "hi")] > 0.999
    conv = pairwise_significance(kept, unit="conversation")
    means = kept.groupby(["system", "conversation_id"])["z"].mean()
    expected = stats.mannwhitneyu(means["hi"], means["mid"], alternative="greater", method="asymptotic").pvalue
    got = conv.set_index(["system_a", "system_b"]).loc[("hi", "mid"), "p_value"]
    assert got == pytest.approx(expected)
    with pytest.raises(ValueError, match="unit"):
        pairwise_significance(kept, unit="item")


def test_the_default_significance_test_is_clustered_by_worker_by_hand():
    # 12 workers, each with their own taste for each system (worker x system effects): by hand, the
    # difference of mean z over its worker-clustered sandwich standard error, Student's t with 11 df
    rng = np.random.default_rng(8)
    rows = []
    for w in range(12):
        taste = {"x": rng.normal(0.3, 0.5), "y": rng.normal(0, 0.5)}
        for system in ("x", "y"):
            for c in range(2):
                rows += [(f"w{w}", system, f"w{w}-{system}{c}", taste[system] + rng.normal(0, 0.3)) for _ in range(7)]
    kept = pd.DataFrame(rows, columns=["worker_id", "system", "conversation_id", "z"])
    table = pairwise_significance(kept).set_index(["system_a", "system_b"])
    m = kept.groupby("system")["z"].mean()
    n = kept.groupby("system")["z"].size()
    infl = sum(
        ((g.loc[g.system == "x", "z"] - m["x"]).sum() / n["x"] - (g.loc[g.system == "y", "z"] - m["y"]).sum() / n["y"])
        ** 2
        for _, g in kept.groupby("worker_id")
    )
    se = np.sqrt(12 / 11 * infl)
    assert table.loc[("x", "y"), "p_value"] == pytest.approx(stats.t.sf((m["x"] - m["y"]) / se, 11))
    assert table.loc[("y", "x"), "p_value"] == pytest.approx(1 - table.loc[("x", "y"), "p_value"])
    # the per-rating test takes 168 ratings a system as independent: a far smaller p on the same data
    naive = pairwise_significance(kept, unit="rating").set_index(["system_a", "system_b"])
    assert naive.loc[("x", "y"), "p_value"] < table.loc[("x", "y"), "p_value"]


def test_replication_by_hand():
    a = pd.DataFrame(
        {
            "system": ["p", "q", "r", "s"],
            "n": 1,
            "z": [1.0, 0.5, 0.0, -1.0],
            "fun": [0.1, 0.2, 0.3, 0.4],
            "raw": 0.0,
            "rank": 1,
        }
    )
    same = replication(a, a)
    assert np.allclose(same[["pearson", "spearman", "kendall"]], 1.0)
    flipped = a.assign(z=-a["z"], fun=-a["fun"])
    assert np.allclose(replication(a, flipped)[["pearson", "spearman", "kendall"]], -1.0)
    partial = replication(a, a[a["system"] != "s"].assign(z=[0.0, 1.0, 2.0]))
    row = partial.set_index("criterion").loc["overall"]
    assert row["n_systems"] == 3 and row["pearson"] == pytest.approx(-1.0)


def test_replication_between_two_runs(tmp_path):
    run1 = write_study(tmp_path / "r1", diligent("a1", "w1", LEVELS) + diligent("a2", "w2", LEVELS))
    other = {"good": 50, "mid": 70, "bad": 30, "worse": 20, "worst": 12}
    run2 = write_study(tmp_path / "r2", diligent("b1", "v1", other) + diligent("b2", "v2", other, shift=3))
    rep = analyze_live_chat(run1, replicate_dir=run2).tables["replication"].set_index("criterion")
    assert rep.loc["overall", "n_systems"] == 5
    assert rep.loc["overall", "spearman"] == pytest.approx(0.9)  # one adjacent swap in five
    assert rep.loc["overall", "pearson"] < 1


# ---------------------------------------------------------------- bad input


def test_unknown_criterion_names_file_value_and_configured(tmp_path):
    rows = diligent("a1", "w1", LEVELS)
    rows[7]["criterion"] = "boring"  # a real system's rating (rows 0–6 are the QC bot's)
    study = write_study(tmp_path, rows)
    with pytest.raises(InputError) as error:
        analyze_live_chat(study)
    message = str(error.value)
    assert "ratings.csv" in message and "'boring'" in message and "'topic'" in message
    # the same file reads fine once the criterion is configured
    extra = (*DEFAULT_CRITERIA, Criterion("boring", "negative", "It was boring.", qc=False))
    assert analyze_live_chat(study, criteria=extra).tables["systems"]["boring"].notna().sum() == 1


@pytest.mark.parametrize(
    "breakage, match",
    [
        (lambda r: r.drop(columns="score"), r"missing column\(s\) \['score'\]"),
        (
            lambda r: r.assign(score=r["score"].where(r.index != 3, 101)),
            "line 5: score '101.0' is not a number within 0–100",
        ),
        (lambda r: r.assign(score=r["score"].astype(object).where(r.index != 0, "high")), "'high'"),
        (lambda r: r.assign(is_control=r["is_control"].where(r.index != 0, 2)), "is_control"),
        (
            lambda r: r.assign(assignment_id=r["assignment_id"].where(r.index != 0, "ghost")),
            "'ghost' is not in assignments.csv",
        ),
    ],
)
def test_bad_ratings_are_reported(tmp_path, breakage, match):
    study = write_study(tmp_path, diligent("a1", "w1", LEVELS))
    ratings = pd.read_csv(study / "ratings.csv")
    breakage(ratings).to_csv(study / "ratings.csv", index=False)
    with pytest.raises(InputError, match=match):
        analyze_live_chat(study)


def test_repeated_ratings_follow_the_duplicate_policy(tmp_path):
    study = write_study(tmp_path, diligent("a1", "w1", LEVELS))
    ratings = pd.read_csv(study / "ratings.csv")
    again = ratings.iloc[[8]].assign(score=0.0)  # a second, different rating of one criterion
    pd.concat([ratings, again]).to_csv(study / "ratings.csv", index=False)
    with pytest.warns(DuplicateRowsWarning, match="removed 1 row"):
        first = analyze_live_chat(study, n_boot=10)
    assert first.summary["duplicates"] == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert "removed 1 row(s)" in first.summary["warnings"][0]
    clean = write_study(tmp_path / "clean", diligent("a1", "w1", LEVELS))
    pd.testing.assert_frame_equal(first.tables["systems"], analyze_live_chat(clean, n_boot=10).tables["systems"])
    with pytest.warns(DuplicateRowsWarning):
        last = analyze_live_chat(study, n_boot=10, duplicates="last")
    assert not last.tables["systems"].equals(first.tables["systems"])
    with pytest.raises(InputError, match="repeats") as info:
        analyze_live_chat(study, duplicates="error")
    assert info.value.line == len(ratings) + 2


def test_missing_files_are_named(tmp_path):
    with pytest.raises(InputError, match="assignments.csv: not found"):
        analyze_live_chat(tmp_path)


def test_a_repeated_assignment_id_is_counted_and_resolved_not_refused(tmp_path):
    study = write_study(tmp_path / "dup", diligent("a1", "w1", LEVELS))
    table = pd.read_csv(study / "assignments.csv")
    pd.concat([table, table]).to_csv(study / "assignments.csv", index=False)
    with pytest.warns(DuplicateRowsWarning, match="removed 1 row"):
        result = analyze_live_chat(study, n_boot=10)
    assert result.summary["assignment_duplicates"] == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert (
        "1 assignment_id(s) of assignments.csv repeat; duplicate policy 'first' removed 1 row(s)"
        in result.summary["warnings"]
    )
    assert result.summary["hits"] == 1 and list(result.tables["workers"]["assignments"]) == [1]
    with pytest.raises(InputError, match="repeats .*assignment_id='a1'") as info:
        analyze_live_chat(study, duplicates="error")
    assert info.value.line == 3


def test_the_paper_run_by_default_uses_the_worker_clustered_test_and_says_so(tmp_path):
    from click.testing import CliRunner

    from hitkit.cli import main

    default = CliRunner().invoke(
        main, ["analyze", "live_chat", str(SHARED_RUN), "--out", str(tmp_path / "d"), "--n-boot", "20", "--no-progress"]
    )
    paper = CliRunner().invoke(
        main,
        [
            "analyze",
            "live_chat",
            str(SHARED_RUN),
            "--out",
            str(tmp_path / "p"),
            "--n-boot",
            "20",
            "--unit",
            "rating",
            "--no-progress",
        ],
    )
    assert default.exit_code == 0 and paper.exit_code == 0, default.output + paper.output
    d = pd.read_csv(tmp_path / "d" / "significance.csv").set_index(["system_a", "system_b"])["p_value"]
    p = pd.read_csv(tmp_path / "p" / "significance.csv").set_index(["system_a", "system_b"])["p_value"]
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["significance_unit"] == "worker"
    assert json.loads((tmp_path / "p" / "summary.json").read_text())["significance_unit"] == "rating"
    ahead = p < 0.5  # where the first system leads, the clustered p-values are larger, as they must be
    assert d[("A", "E")] < 1e-6 and (d[ahead] > p[ahead]).mean() > 0.8
    from hitkit.report.build import report

    files = report(tmp_path / "d")
    assert "clustered by worker" in files.methods
    refused = CliRunner().invoke(
        main, ["analyze", "spot_the_bot", str(SHARED_RUN), "--out", str(tmp_path / "x"), "--unit", "rating"]
    )
    assert refused.exit_code != 0 and "--unit applies to" in refused.output
