"""Spot The Bot (METHODS §2): win function, chi-square, TrueSkill, clustered ranking, input."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import trueskill
from hypothesis import given, settings
from hypothesis import strategies as st

from hitkit.analysis.inference import DuplicateRowsWarning
from hitkit.analysis.ranking import clusters
from hitkit.analysis.trueskill_vec import TrueSkillEnv, TrueSkillSettings, rate_repeated, rate_sequences
from hitkit.errors import InputError
from hitkit.protocols.spot_the_bot.analysis import analyze_spot_the_bot
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.protocols.spot_the_bot.annotators import agreement, annotation_time, annotator_correctness, segment_lengths
from hitkit.protocols.spot_the_bot.ranking import games, rank_with_bootstrap, ranking
from hitkit.protocols.spot_the_bot.reading import load_annotations, read_annotations, segment_annotations
from hitkit.protocols.spot_the_bot.win_rates import feature_win_rates, system_feature_win_rates, win_rates

ASSIGNMENT_HEADER = "study,hit_id,assignment_id,worker_id,status,work_time_s\n"


def segment(
    worker, conversation, system_0, system_1, label_0, label_1, k=2, features=(0, 0, 0), elapsed=30.0, assignment=None
):
    """The two rows of one segment annotation; ``features`` as entity 0 answered them."""
    base = {
        "study": "s1",
        "hit_id": "h1",
        "assignment_id": assignment or f"as-{worker}",
        "worker_id": worker,
        "conversation_id": conversation,
        "segment_exchanges": k,
        "elapsed_s": elapsed,
    }
    return [
        {
            **base,
            "entity": 0,
            "system": system_0,
            "label": label_0,
            **dict(zip(("fluency", "sensibleness", "specificity"), features)),
        },
        {
            **base,
            "entity": 1,
            "system": system_1,
            "label": label_1,
            **dict(zip(("fluency", "sensibleness", "specificity"), (-f for f in features))),
        },
    ]


def frame(*segments) -> pd.DataFrame:
    return pd.DataFrame([row for seg in segments for row in seg], columns=list(ANNOTATION_COLUMNS))


def simulate(
    detect: dict[str, float],
    n_conv: int = 40,
    seed: int = 0,
    lengths=(1, 2, 3),
    unsure: float = 0.1,
    human_human: int = 10,
) -> pd.DataFrame:
    """Bot–bot conversations for every pair, plus human–human ones; 2 annotators per segment.

    A speaker of system s is labelled bot with probability ``detect[s]``, unsure with ``unsure``,
    otherwise human (humans: bot with 0.05). Feature answers favour the less detectable speaker.
    """
    rng = np.random.default_rng(seed)
    names = list(detect)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    conversations = [(a, b) if rng.random() < 0.5 else (b, a) for a, b in pairs for _ in range(n_conv)]
    conversations += [("human", "human")] * human_human
    rows = []
    for c, (a, b) in enumerate(conversations):
        for k in lengths:
            for w in rng.choice(12, size=2, replace=False):
                labels = []
                for s in (a, b):
                    d, u = detect.get(s, 0.05), rng.random()
                    labels.append("bot" if u < d else "unsure" if u < d + unsure else "human")
                lean = detect.get(b, 0.05) - detect.get(a, 0.05)
                features = tuple(int(np.sign(lean + rng.normal(0, 0.3))) for _ in range(3))
                rows.append(
                    segment(
                        f"w{w}",
                        f"c{c}",
                        a,
                        b,
                        *labels,
                        k=k,
                        features=features,
                        elapsed=float(10 + 5 * k + rng.integers(0, 5)),
                        assignment=f"w{w}-k{k}",
                    )
                )
    return frame(*rows)


def write_study(tmp_path, annotations: pd.DataFrame, statuses: dict[str, str] | None = None):
    annotations.to_csv(tmp_path / "annotations.csv", index=False)
    if statuses is not None:
        lines = [f"s1,h1,{a},w,{s},60\n" for a, s in statuses.items()]
        (tmp_path / "assignments.csv").write_text(ASSIGNMENT_HEADER + "".join(lines))
    return tmp_path


def pair(table: pd.DataFrame, a: str, b: str) -> pd.Series:
    rows = table[(table["system_a"] == a) & (table["system_b"] == b)]
    assert len(rows) == 1, (a, b, table)
    return rows.iloc[0]


# --- the win function, by hand ---------------------------------------------------------------


def test_win_function_hand_worked():
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),  # A wins (human > bot)
        segment("w2", "c2", "A", "B", "unsure", "bot"),  # A wins (unsure > bot)
        segment("w3", "c3", "B", "A", "unsure", "unsure"),  # tie
        segment("w4", "c4", "B", "A", "human", "unsure"),  # B wins, entity order swapped
        segment("w5", "c5", "A", "B", "bot", "bot"),  # tie
    )
    table = win_rates(ann)
    ab, ba = pair(table, "A", "B"), pair(table, "B", "A")
    assert (ab["wins"], ab["losses"], ab["ties"]) == (2, 1, 2)
    assert (ba["wins"], ba["losses"], ba["ties"]) == (1, 2, 2)
    assert ab["win_rate"] == pytest.approx(2 / 3)
    assert ba["win_rate"] == pytest.approx(1 / 3)
    assert ab["p_value"] == pytest.approx(ba["p_value"])
    assert len(table) == 2


def test_each_annotator_counts_separately():
    one = frame(segment("w1", "c1", "A", "B", "human", "bot"))
    two = frame(segment("w1", "c1", "A", "B", "human", "bot"), segment("w2", "c1", "A", "B", "human", "bot"))
    assert pair(win_rates(one), "A", "B")["wins"] == 1
    assert pair(win_rates(two), "A", "B")["wins"] == 2


def test_chi_square_p_on_known_case():
    ann = frame(
        *[segment(f"w{i}", f"c{i}", "A", "B", "human", "bot") for i in range(10)],
        *[segment(f"v{i}", f"d{i}", "A", "B", "bot", "human") for i in range(4)],
        segment("u", "e", "A", "B", "bot", "bot"),
    )
    row = pair(win_rates(ann), "A", "B")
    # Chi-square with 1 df: statistic ((10 − 7)² + (4 − 7)²) / 7 = 18/7, p = erfc(√(x / 2)).
    assert row["p_value"] == pytest.approx(math.erfc(math.sqrt(18 / 7 / 2)), rel=1e-9)
    assert (row["wins"], row["losses"], row["ties"]) == (10, 4, 1)


def test_all_ties_give_nan_rate_and_p_one():
    row = pair(win_rates(frame(segment("w", "c", "A", "B", "bot", "bot"))), "A", "B")
    assert math.isnan(row["win_rate"]) and row["p_value"] == 1.0


def test_self_chat_rows_count_each_annotation_once():
    ann = frame(
        segment("w1", "c1", "human", "human", "human", "unsure"),
        segment("w2", "c1", "human", "human", "human", "human"),
        segment("w3", "c2", "human", "human", "bot", "human"),
        segment("w4", "c3", "A", "B", "human", "bot"),
    )
    table = win_rates(ann)
    hh = pair(table, "human", "human")
    assert (hh["wins"], hh["losses"], hh["ties"]) == (2, 2, 1)
    assert hh["win_rate"] == 0.5 and hh["p_value"] == pytest.approx(1.0)
    # Self-chat is not a ranking game.
    assert list(games(ann)["winner"]) == ["A"]


def test_feature_win_rates_use_entity_preferences():
    ann = frame(
        segment("w1", "c1", "A", "B", "bot", "bot", features=(1, -1, 0)),
        segment("w2", "c2", "B", "A", "bot", "bot", features=(-1, -1, 0)),
    )
    table = feature_win_rates(ann)
    by = {f: pair(table[table["feature"] == f], "A", "B") for f in ("fluency", "sensibleness", "specificity")}
    assert (by["fluency"]["wins"], by["fluency"]["losses"]) == (2, 0)
    assert (by["sensibleness"]["wins"], by["sensibleness"]["losses"]) == (1, 1)
    assert (by["specificity"]["ties"], by["specificity"]["wins"]) == (2, 0)


def test_segment_annotations_pair_the_entities_in_file_order():
    ann = frame(
        segment("w1", "c9", "B", "A", "unsure", "human", elapsed=12.0), segment("w1", "c1", "A", "C", "bot", "bot")
    )
    seg = segment_annotations(ann.iloc[[1, 0, 2, 3]])
    assert list(seg["conversation_id"]) == ["c9", "c1"]
    assert list(seg["outcome"]) == [-1, 0]
    assert seg["elapsed_s"].iloc[0] == 12.0


# --- TrueSkill ---------------------------------------------------------------------------------

game_sequences = st.integers(2, 5).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.lists(st.tuples(st.integers(0, k - 1), st.integers(1, k - 1), st.booleans()), min_size=1, max_size=30),
    )
)


def package_ratings(k, sequence, env):
    ratings = [env.create_rating() for _ in range(k)]
    for first, offset, drawn in sequence:
        second = (first + offset) % k
        ratings[first], ratings[second] = trueskill.rate_1vs1(ratings[first], ratings[second], drawn=drawn, env=env)
    return np.array([r.mu for r in ratings]), np.array([r.sigma for r in ratings])


def as_arrays(k, sequence):
    first = np.array([f for f, _, _ in sequence])
    second = (first + np.array([o for _, o, _ in sequence])) % k
    return first, second, np.array([d for _, _, d in sequence])


@settings(max_examples=60, deadline=None)
@given(
    game_sequences,
    st.sampled_from(
        [(25.0, 25 / 3, 25 / 6, 25 / 300, 0.10), (0.0, 1.0, 0.5, 0.01, 0.3), (25.0, 25 / 3, 4.0, 0.0, 0.0)]
    ),
)
def test_trueskill_matches_package(case, constants):
    k, sequence = case
    mu0, sigma0, beta, tau, p = constants
    mine = TrueSkillEnv(mu=mu0, sigma=sigma0, beta=beta, tau=tau, draw_probability=p)
    # The package's scipy backend computes cdf/pdf/ppf exactly; its default backend
    # approximates erfc (~1e-7 relative), so the two agree to ~1e-5 over 30 games.
    exact = trueskill.TrueSkill(mu=mu0, sigma=sigma0, beta=beta, tau=tau, draw_probability=p, backend="scipy")
    default = trueskill.TrueSkill(mu=mu0, sigma=sigma0, beta=beta, tau=tau, draw_probability=p)
    if p == 0 and any(d for _, _, d in sequence):
        sequence = [(f, o, False) for f, o, _ in sequence]  # no draws when they are impossible
    mu, sigma = rate_sequences(*as_arrays(k, sequence), k, mine)
    want_mu, want_sigma = package_ratings(k, sequence, exact)
    np.testing.assert_allclose(mu, want_mu, atol=1e-6, rtol=0)
    np.testing.assert_allclose(sigma, want_sigma, atol=1e-6, rtol=0)
    approx_mu, approx_sigma = package_ratings(k, sequence, default)
    np.testing.assert_allclose(mu, approx_mu, atol=1e-4 * max(sigma0, 1), rtol=0)
    np.testing.assert_allclose(sigma, approx_sigma, atol=1e-4 * max(sigma0, 1), rtol=0)


@settings(max_examples=20, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(
                st.lists(
                    st.tuples(st.integers(0, k - 1), st.integers(1, k - 1), st.booleans()), min_size=8, max_size=8
                ),
                min_size=1,
                max_size=5,
            ),
        )
    )
)
def test_trueskill_replicates_are_independent(case):
    k, sequences = case
    arrays = [as_arrays(k, s) for s in sequences]
    mu, sigma = rate_sequences(*(np.stack([a[i] for a in arrays]) for i in range(3)), k)
    for r, one in enumerate(arrays):
        single_mu, single_sigma = rate_sequences(*one, k)
        np.testing.assert_allclose(mu[r], single_mu, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sigma[r], single_sigma, rtol=0, atol=1e-12)


def test_win_v_and_w_hold_in_both_tails():
    from scipy import special

    from hitkit.analysis.trueskill_vec import _v_w_win

    # v = pdf / cdf: the pdf / ndtr route in the middle, the erfcx route far in the lower tail
    # (where both underflow), 0 for a certain win.
    x = np.array([-45.0, -35.0, -29.0, 0.0, 3.0, 40.0])
    v, w = _v_w_win(x)
    want = np.exp(-0.5 * x * x - 0.5 * math.log(2 * math.pi) - special.log_ndtr(x))
    np.testing.assert_allclose(v, want, rtol=1e-12)
    assert v[3] == pytest.approx(math.sqrt(2 / math.pi)) and v[-1] == 0.0
    np.testing.assert_allclose(w, v * (v + x), rtol=0, atol=0)
    assert ((w >= 0) & (w < 1)).all()  # a win never grows a variance (w ≥ 0) nor zeroes it


def test_trueskill_rejects_self_play_and_bad_env():
    with pytest.raises(ValueError, match="itself"):
        rate_sequences(np.array([0]), np.array([0]), np.array([False]), 2)
    with pytest.raises(ValueError, match="draw_probability"):
        TrueSkillEnv(draw_probability=1.0)


def test_trueskill_refuses_draws_it_cannot_have():
    with pytest.raises(ValueError, match="draw_probability is 0"):
        rate_sequences(np.array([0]), np.array([1]), np.array([True]), 2, TrueSkillEnv(draw_probability=0.0))


# --- annotator tables --------------------------------------------------------------------------


def test_agreement_hand_worked():
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),
        segment("w2", "c1", "A", "B", "human", "human"),
        segment("w3", "c1", "A", "B", "bot", "bot"),
        segment("w1", "c2", "A", "human", "unsure", "human", k=3),
        segment("w2", "c2", "A", "human", "unsure", "human", k=3),
    )
    table = agreement(ann).set_index(["system", "label"])
    # A in c1: human, human, bot. Pairs with a human label: 3, both human: 1; with bot: 2, none.
    # A in c2: unsure twice: one pair, both unsure.
    assert tuple(table.loc[("A", "human"), ["pairs", "both"]]) == (3, 1)
    assert tuple(table.loc[("A", "bot"), ["pairs", "both"]]) == (2, 0)
    assert tuple(table.loc[("A", "unsure"), ["pairs", "both"]]) == (1, 1)
    # B in c1: bot, human, bot.
    assert tuple(table.loc[("B", "bot"), ["pairs", "both"]]) == (3, 1)
    assert table.loc[("B", "bot"), "agreement"] == pytest.approx(1 / 3)
    assert math.isnan(table.loc[("B", "unsure"), "agreement"])
    assert table.loc[("human", "human"), "agreement"] == 1.0


def test_annotator_correctness_hand_worked():
    ann = frame(
        segment("w1", "c1", "A", "B", "bot", "unsure"),
        segment("w1", "c2", "human", "human", "human", "bot", k=1),
        segment("w2", "c1", "A", "B", "human", "bot", k=3),
    )
    table = annotator_correctness(ann).set_index("worker_id")
    assert tuple(table.loc["w1", ["entities", "correct", "hh_entities", "hh_correct"]]) == (4, 2, 2, 1)
    assert table.loc["w1", "correctness"] == 0.5 and table.loc["w1", "hh_correctness"] == 0.5
    assert table.loc["w2", "correctness"] == 0.5 and math.isnan(table.loc["w2", "hh_correctness"])


def test_segment_lengths_and_time_hand_worked():
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot", k=1, elapsed=10.0),
        segment("w2", "c1", "A", "B", "bot", "bot", k=1, elapsed=20.0),
        segment("w3", "c1", "A", "B", "bot", "human", k=2, elapsed=float("nan")),
        segment("w4", "c2", "A", "A", "human", "bot", k=2, elapsed=40.0),
    )
    table = segment_lengths(ann).set_index(["system", "segment_exchanges"])
    a1 = table.loc[("A", 1)]
    assert tuple(a1[["annotations", "games", "wins", "losses", "ties"]]) == (2, 2, 1, 0, 1)
    assert a1["win_rate"] == 1.0 and a1["labelled_human"] == 0.5
    a2 = table.loc[("A", 2)]  # one game lost against B, plus the self-chat's two speakers
    assert tuple(a2[["annotations", "games", "wins", "losses", "ties"]]) == (3, 1, 0, 1, 0)
    assert a2["labelled_human"] == pytest.approx(1 / 3)
    assert table.loc[("B", 2), "win_rate"] == 1.0
    time = annotation_time(ann).set_index("segment_exchanges")
    assert tuple(time.loc[1, ["segment_annotations", "timed", "mean_elapsed_s"]]) == (2, 2, 15.0)
    assert tuple(time.loc[2, ["segment_annotations", "timed", "mean_elapsed_s"]]) == (2, 1, 40.0)


# --- ranking -----------------------------------------------------------------------------------


def test_clusters_merge_overlapping_ranges_transitively():
    order, labels = clusters(np.array([1, 2, 3, 4]), np.array([1, 3, 4, 4]), np.array([4.0, 3.0, 2.0, 1.0]))
    assert list(order) == [0, 1, 2, 3]
    assert labels == ["(1,1)", "(2,4)", "(2,4)", "(2,4)"]
    order, labels = clusters(np.array([3, 1, 1]), np.array([3, 2, 2]), np.array([0.0, 1.0, 2.0]))
    assert list(order) == [2, 1, 0]
    assert labels == ["(3,3)", "(1,2)", "(1,2)"]


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return simulate({"easy": 0.85, "twin1": 0.45, "twin2": 0.45, "hard": 0.10}, seed=3)


def test_ranking_recovers_detectability_order(study):
    table = ranking(study, n_boot=400, seed=1)
    assert list(table["system"][[0, 3]]) == ["hard", "easy"]
    assert set(table["system"][[1, 2]]) == {"twin1", "twin2"}
    assert list(table["cluster"]) == ["(1,1)", "(2,3)", "(2,3)", "(4,4)"]
    assert list(table["win_rate_cluster"]) == ["(1,1)", "(2,3)", "(2,3)", "(4,4)"]
    assert (table["rank_low"] <= table["rank_high"]).all()
    assert table["trueskill_mu"].is_monotonic_decreasing
    assert table["win_rate"].iloc[0] > 0.8
    assert table["win_rate"].iloc[3] < 0.2
    assert "human" not in set(table["system"])  # only met itself
    conservative = ranking(study, n_boot=100, seed=1, by="conservative")
    assert list(conservative["cluster"]) == ["(1,1)", "(2,3)", "(2,3)", "(4,4)"]


def test_ranking_is_deterministic_for_a_seed(study):
    g = games(study).iloc[:300]
    first = rank_with_bootstrap(g, n_boot=50, seed=7)
    second = rank_with_bootstrap(g, n_boot=50, seed=7)
    pd.testing.assert_frame_equal(first, second)


def test_rank_range_follows_the_bootstrap():
    # A beats B every time: every resample ranks A first, so the ranges are single ranks.
    g = pd.DataFrame({"winner": ["A"] * 6, "loser": ["B"] * 6, "drawn": [False] * 6})
    table = rank_with_bootstrap(g, n_boot=40, seed=0)
    assert list(table["system"]) == ["A", "B"]
    assert list(table["rank_low"]) == [1, 2] and list(table["rank_high"]) == [1, 2]
    # One win each way: resamples disagree, the ranges overlap and the systems share a cluster.
    g = pd.DataFrame({"winner": ["A", "B"], "loser": ["B", "A"], "drawn": [False, False]})
    table = rank_with_bootstrap(g, n_boot=200, seed=0)
    assert list(table["cluster"]) == ["(1,2)", "(1,2)"]
    assert list(table["rank_high"]) == [2, 2]


def test_ranking_options_are_checked(study):
    with pytest.raises(ValueError, match="by="):
        rank_with_bootstrap(games(study), by="median")
    with pytest.raises(ValueError, match="n_boot"):
        rank_with_bootstrap(games(study), n_boot=-1)
    empty = ranking(frame(segment("w", "c", "human", "human", "human", "bot")), n_boot=10)
    assert empty.empty and "cluster" in empty.columns


# --- the whole analysis ------------------------------------------------------------------------


def test_analyze_writes_tables_summary_and_figure(tmp_path, study):
    sub = study[study["conversation_id"].isin({f"c{i}" for i in range(0, 240, 3)} | {f"c{i}" for i in range(240, 250)})]
    in_dir = write_study(tmp_path, sub)
    result = analyze_spot_the_bot(in_dir, n_boot=60, seed=2)
    again = analyze_spot_the_bot(in_dir, n_boot=60, seed=2)
    for name in ("win_rates", "feature_win_rates", "ranking"):
        pd.testing.assert_frame_equal(result.tables[name], again.tables[name])
    assert result.summary == again.summary
    assert result.summary["segment_annotations"] == len(sub) // 2
    written = result.write(tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == [
        "agreement.csv",
        "annotation_time.csv",
        "annotators.csv",
        "feature_win_rates.csv",
        "fragility.csv",
        "label_agreement.csv",
        "ranking.csv",
        "segment_lengths.csv",
        "summary.json",
        "system_feature_win_rates.csv",
        "win_rates.csv",
        "win_rates.png",
    ]
    summary = result.summary
    # The settings that decide the numbers are recorded: TrueSkill without dynamics and with the
    # observed tie rate as draw probability, the correction, the resampled units, the policy.
    g = games(sub)
    assert summary["trueskill"]["tau"] == 0.0
    assert summary["trueskill"]["draw_probability"] == pytest.approx(g["drawn"].mean())
    assert summary["trueskill"]["draw_probability_source"] == "observed tie rate"
    assert summary["multiple_comparisons"] == "bonferroni"
    assert summary["ranking_resampled"] == "game" and summary["interval_unit"] == "conversation"
    assert summary["duplicates"] == {"policy": "first", "keys": 0, "rows_removed": 0}
    assert summary["warnings"] == []
    assert summary["median_elapsed_s"] is not None
    assert 0 < result.summary["correctness_mean"] < 1
    assert result.summary["correctness_mean_human_human"] > 0.8  # humans: labelled bot 5 %
    assert (tmp_path / "out" / "win_rates.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["n_boot"] == 60


# --- reading and bad input ---------------------------------------------------------------------


def test_read_keeps_counted_assignments_only(tmp_path):
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot", assignment="a1"),
        segment("w2", "c1", "A", "B", "bot", "human", assignment="a2"),
        segment("w3", "c1", "A", "B", "bot", "human", assignment="a3"),
    )
    write_study(tmp_path, ann, {"a1": "approved", "a2": "returned", "a3": "Submitted"})
    read = read_annotations(tmp_path)
    assert sorted(set(read["assignment_id"])) == ["a1", "a3"]
    assert read["entity"].dtype.kind == "i" and read["fluency"].dtype.kind == "i"
    row = pair(win_rates(read), "A", "B")
    assert (row["wins"], row["losses"]) == (1, 1)


def test_read_accepts_plus_signs_and_empty_elapsed(tmp_path):
    text = (
        ",".join(ANNOTATION_COLUMNS)
        + "\n"
        + ("s1,h1,a1,w1,c1,2,0,A,Human,+1,0,-1,\ns1,h1,a1,w1,c1,2,1,NA,bot,-1,0,+1,\n")
    )
    (tmp_path / "annotations.csv").write_text(text)
    read = read_annotations(tmp_path)
    assert list(read["system"]) == ["A", "NA"]
    assert list(read["fluency"]) == [1, -1] and read["elapsed_s"].isna().all()


def bad(tmp_path, rows, match, line=None):
    pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS)).to_csv(tmp_path / "annotations.csv", index=False)
    with pytest.raises(InputError, match=match) as info:
        read_annotations(tmp_path)
    assert "annotations.csv" in str(info.value)
    assert info.value.line == line


def good_rows():
    return segment("w1", "c1", "A", "B", "human", "bot") + segment("w2", "c1", "A", "B", "bot", "bot")


@pytest.mark.parametrize(
    "column, value, match",
    [
        ("label", "robot", "label 'robot'"),
        ("entity", 2, "entity '2'"),
        ("segment_exchanges", 0, "segment_exchanges"),
        ("segment_exchanges", "two", "segment_exchanges"),
        ("worker_id", "", "worker_id is empty"),
        ("elapsed_s", "soon", "elapsed_s"),
        ("specificity", 2, "specificity '2'"),
    ],
)
def test_bad_values_name_the_line(tmp_path, column, value, match):
    rows = good_rows()
    rows[2] = {**rows[2], column: value}
    bad(tmp_path, rows, match, line=4)


def test_segment_needs_both_entities(tmp_path):
    bad(tmp_path, good_rows()[:3], "no row for the other entity", line=4)
    rows = good_rows()
    rows[3] = {**rows[3], "entity": 0}
    # Entity 0 twice: the second is a repeat (dropped by the default policy), entity 1 is missing.
    with pytest.warns(DuplicateRowsWarning):
        bad(tmp_path, rows, "no row for the other entity", line=4)


def test_preferences_must_mirror(tmp_path):
    rows = good_rows()
    rows[2] = {**rows[2], "fluency": 1}
    rows[3] = {**rows[3], "fluency": 1}
    bad(tmp_path, rows, "fluency is \\+1 for this entity but \\+1", line=5)


def test_missing_file_column_and_orphan_assignment(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_annotations(tmp_path)
    pd.DataFrame(good_rows()).drop(columns="label").to_csv(tmp_path / "annotations.csv", index=False)
    with pytest.raises(InputError, match="missing column"):
        read_annotations(tmp_path)
    write_study(tmp_path, frame(good_rows()), {"as-w1": "approved"})
    with pytest.raises(InputError, match="'as-w2' is not in assignments.csv") as info:
        read_annotations(tmp_path)
    assert info.value.line == 4


def test_nothing_counted_is_an_error(tmp_path):
    write_study(tmp_path, frame(good_rows()), {"as-w1": "expired", "as-w2": "returned"})
    with pytest.raises(InputError, match="nothing to analyse"):
        analyze_spot_the_bot(tmp_path, n_boot=10)


def test_frames_passed_directly_are_checked_too():
    rows = good_rows()
    rows[3] = {**rows[3], "fluency": 1}
    table = frame(rows).rename_axis("named")
    table.index = table.index + 10
    with pytest.raises(InputError, match="annotations row 13: fluency"):
        win_rates(table)
    with pytest.raises(InputError, match="missing column"):
        win_rates(frame(good_rows()).drop(columns="system"))


# --- issue 19: real data's warts, settings, corrections and clustered intervals ----------------


def test_repeated_annotations_follow_the_policy_and_are_counted(tmp_path):
    # w1 annotated c1 twice (the released files' wart): once human/bot, then bot/human.
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),
        segment("w1", "c1", "A", "B", "bot", "human"),
        segment("w2", "c1", "A", "B", "human", "bot"),
    )
    write_study(tmp_path, ann)
    with pytest.warns(DuplicateRowsWarning, match="1 segment annotation .*removed 2 row"):
        first, report = load_annotations(tmp_path)
    assert report == {"policy": "first", "keys": 1, "rows_removed": 2}
    assert pair(win_rates(first, n_boot=0), "A", "B")[["wins", "losses"]].tolist() == [2, 0]
    with pytest.warns(DuplicateRowsWarning):
        last, _ = load_annotations(tmp_path, duplicates="last")
    assert pair(win_rates(last, n_boot=0), "A", "B")[["wins", "losses"]].tolist() == [1, 1]
    with pytest.warns(DuplicateRowsWarning):
        dropped, report = load_annotations(tmp_path, duplicates="drop")
    assert report["rows_removed"] == 4 and set(dropped["worker_id"]) == {"w2"}
    with pytest.raises(InputError, match="repeats.*--duplicates") as info:
        load_annotations(tmp_path, duplicates="error")
    assert info.value.line == 4
    with pytest.warns(DuplicateRowsWarning):
        result = analyze_spot_the_bot(tmp_path, n_boot=20)
    assert result.summary["duplicates"]["rows_removed"] == 2
    assert "removed 2 row(s)" in result.summary["warnings"][0]


def test_a_repeated_assignment_id_in_assignments_csv_is_counted_not_refused(tmp_path):
    ann = frame(segment("w1", "c1", "A", "B", "human", "bot"), segment("w2", "c1", "A", "B", "human", "bot"))
    write_study(tmp_path, ann, {"as-w1": "approved", "as-w2": "approved"})
    with (tmp_path / "assignments.csv").open("a") as f:
        f.write("s1,h1,as-w2,w,approved,60\n")
    with pytest.warns(DuplicateRowsWarning, match="assignment"):
        result = analyze_spot_the_bot(tmp_path, n_boot=10)
    assert result.summary["assignment_duplicates"] == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert result.summary["segment_annotations"] == 2
    assert any("1 assignment_id(s) of assignments.csv repeat" in w for w in result.summary["warnings"])
    with pytest.raises(InputError, match="repeats"):
        analyze_spot_the_bot(tmp_path, n_boot=10, duplicates="error")


def test_trueskill_defaults_are_no_dynamics_and_the_observed_tie_rate(study):
    g = games(study)
    env = TrueSkillSettings().env_for(g)
    assert env.tau == 0.0 and env.draw_probability == pytest.approx(g["drawn"].mean())
    assert (env.mu, env.sigma, env.beta) == (25.0, 25 / 3, 25 / 6)
    given = TrueSkillSettings(tau=0.5, draw_probability=0.2, mu=10.0).env_for(g)
    assert (given.tau, given.draw_probability, given.sigma) == (0.5, 0.2, 10 / 3)
    # The ranking's default environment is this one.
    pd.testing.assert_frame_equal(
        rank_with_bootstrap(g, n_boot=20, seed=1), rank_with_bootstrap(g, n_boot=20, seed=1, env=env)
    )


def test_no_dynamics_makes_the_ranking_depend_less_on_game_order():
    # Five close systems; 200 random orders of the same games. With the package's tau = 25/300
    # late games outweigh early ones and the point ranking changes with the order (issue 19:
    # 10 rankings from 200 orders of one domain); without dynamics far fewer orders disagree.
    sim = simulate({"a": 0.5, "b": 0.47, "c": 0.44, "d": 0.41, "e": 0.38}, n_conv=10, seed=5)
    g = games(sim)
    systems = sorted(set(g["winner"]) | set(g["loser"]))
    index = {s: i for i, s in enumerate(systems)}
    w, l, d = g["winner"].map(index).to_numpy(), g["loser"].map(index).to_numpy(), g["drawn"].to_numpy()
    rng = np.random.default_rng(0)
    orders = np.stack([rng.permutation(len(w)) for _ in range(200)])

    def rankings(env):
        mu, _ = rate_sequences(w[orders], l[orders], d[orders], len(systems), env)
        return len({tuple(np.argsort(-m)) for m in mu})

    package = rankings(TrueSkillEnv(draw_probability=float(d.mean())))
    no_dynamics = rankings(TrueSkillSettings().env_for(g))
    assert no_dynamics * 2 < package


def test_rate_repeated_plays_each_game_as_often_as_weighted():
    first, second, drawn = np.array([0, 1, 2, 0]), np.array([1, 2, 0, 2]), np.array([False, True, False, False])
    env = TrueSkillEnv(tau=0.0, draw_probability=0.2)
    weights = np.array([[1, 1, 1, 1], [2, 0, 1, 0], [0, 0, 0, 3]])
    mu, sigma = rate_repeated(first, second, drawn, weights, 3, env)
    for r, w in enumerate(weights):
        idx = np.repeat(np.arange(4), w)
        want_mu, want_sigma = rate_sequences(first[idx], second[idx], drawn[idx], 3, env)
        np.testing.assert_allclose(mu[r], want_mu, atol=1e-12)
        np.testing.assert_allclose(sigma[r], want_sigma, atol=1e-12)


def test_win_rates_carry_corrected_p_and_conversation_clustered_intervals(study):
    table = win_rates(study, n_boot=300, seed=1)
    cross = table[table["system_a"] != table["system_b"]]
    m = len(cross) // 2  # unordered pairs: the family
    np.testing.assert_allclose(cross["p_adjusted"], np.minimum(1, m * cross["p_value"]))
    assert (table["correction"] == "bonferroni").all()
    assert (table["interval_unit"] == "conversation").all()
    assert ((cross["win_rate_low"] <= cross["win_rate"]) & (cross["win_rate"] <= cross["win_rate_high"])).all()
    holm_table = win_rates(study, n_boot=0, correction="holm")
    assert (holm_table["p_adjusted"] <= table["p_adjusted"] + 1e-12).all()
    # Every annotation three times over, as if three more workers agreed with each one: the
    # per-annotation bootstrap believes it; the conversation bootstrap does not.
    copies = pd.concat(
        [
            study.assign(worker_id=study["worker_id"] + f"x{i}", assignment_id=study["assignment_id"] + f"x{i}")
            for i in range(3)
        ],
        ignore_index=True,
    )

    def width(t):
        t = t[t["system_a"] != t["system_b"]]
        return float((t["win_rate_high"] - t["win_rate_low"]).mean())

    naive = win_rates(copies, n_boot=300, seed=1, cluster="annotation")
    clustered = win_rates(copies, n_boot=300, seed=1)
    assert width(naive) < 0.7 * width(clustered)
    assert width(clustered) == pytest.approx(width(table), rel=0.2)


def test_ranking_can_resample_conversations_or_workers(study):
    g = games(study)
    by_game = rank_with_bootstrap(g, n_boot=100, seed=3)
    by_conv = rank_with_bootstrap(g, n_boot=100, seed=3, resample="conversation")
    by_worker = rank_with_bootstrap(g, n_boot=100, seed=3, resample="worker")
    for t in (by_conv, by_worker):
        pd.testing.assert_series_equal(t["trueskill_mu"], by_game["trueskill_mu"])
        assert list(t["cluster"]) == ["(1,1)", "(2,3)", "(2,3)", "(4,4)"]
    with pytest.raises(ValueError, match="resample"):
        rank_with_bootstrap(g, resample="segment")
    # Mean of pairwise win rates (the paper's aggregate) beside the pooled one.
    assert by_game["mean_pairwise_win_rate"].between(0, 1).all()


def test_system_feature_win_rates_pool_opponents():
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot", features=(1, 0, -1)),
        segment("w2", "c2", "A", "C", "human", "bot", features=(1, 1, 0)),
    )
    table = system_feature_win_rates(ann).set_index(["feature", "system"])
    assert table.loc[("fluency", "A"), ["wins", "losses"]].tolist() == [2, 0]
    assert table.loc[("specificity", "A"), ["wins", "losses", "ties"]].tolist() == [0, 1, 1]
    assert table.loc[("fluency", "B"), "win_rate"] == 0.0


def test_paper_agreement_share_hand_worked():
    # A in c1 labelled human, human, bot by three annotators: human given 2 times with 2
    # co-annotators each (4 co-labels), 2 of them human: 0.5. bot: given once, 0 of 2 match.
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),
        segment("w2", "c1", "A", "B", "human", "bot"),
        segment("w3", "c1", "A", "B", "bot", "bot"),
    )
    table = agreement(ann).set_index(["system", "label"])
    assert table.loc[("A", "human"), "agreement_paper"] == pytest.approx(0.5)
    assert table.loc[("A", "bot"), "agreement_paper"] == 0.0
    assert table.loc[("B", "bot"), "agreement_paper"] == 1.0


def test_implausible_times_are_flagged_counted_and_left_out(tmp_path):
    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot", elapsed=20.0, assignment="a1"),
        segment("w2", "c1", "A", "B", "bot", "bot", elapsed=-4.0, assignment="a2"),
        segment("w3", "c1", "A", "B", "bot", "bot", elapsed=1.6e9, assignment="a3"),
        segment("w4", "c1", "A", "B", "bot", "bot", elapsed=900.0, assignment="a4"),
        segment("w5", "c1", "A", "B", "bot", "human", elapsed=40.0, assignment="a5"),
    )
    write_study(tmp_path, ann, {f"a{i}": "approved" for i in range(1, 6)})
    (tmp_path / "assignments.csv").write_text(
        ASSIGNMENT_HEADER + "".join(f"s1,h1,a{i},w{i},approved,600\n" for i in range(1, 6))
    )
    result = analyze_spot_the_bot(tmp_path, n_boot=10)
    assert result.summary["implausible_elapsed"] == 3  # negative, timestamp, over the assignment
    assert result.summary["median_elapsed_s"] == 30.0
    times = result.tables["annotation_time"].iloc[0]
    assert (times["implausible"], times["timed"], times["median_elapsed_s"]) == (3, 2, 30.0)
    assert any("implausible" in w for w in result.summary["warnings"])


def test_cli_takes_every_ranking_setting_and_records_it(tmp_path):
    from click.testing import CliRunner

    from hitkit.cli import main

    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),
        segment("w1", "c1", "A", "B", "human", "bot"),  # a repeat: counted, kept once
        segment("w2", "c1", "A", "B", "human", "human"),
        segment("w3", "c2", "B", "C", "human", "bot"),
        segment("w4", "c3", "A", "C", "unsure", "bot"),
    )
    write_study(tmp_path, ann)
    out = tmp_path / "out"
    run = CliRunner().invoke(
        main,
        [
            "analyze",
            "spot_the_bot",
            str(tmp_path),
            "--out",
            str(out),
            "--no-progress",
            "--trueskill-tau",
            "0.1",
            "--draw-probability",
            "0.2",
            "--trueskill-mu",
            "30",
            "--correction",
            "holm",
            "--cluster",
            "worker",
            "--resample",
            "conversation",
            "--n-boot",
            "30",
            "--rank-by",
            "conservative",
        ],
    )
    assert run.exit_code == 0, run.output
    assert "warning: 1 segment annotation" in run.output and "removed 2 row(s)" in run.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trueskill"] == {
        "mu": 30.0,
        "sigma": 10.0,
        "beta": 5.0,
        "tau": 0.1,
        "draw_probability": 0.2,
        "draw_probability_source": "given",
    }
    assert (
        summary["multiple_comparisons"],
        summary["interval_unit"],
        summary["ranking_resampled"],
        summary["ranked_by"],
        summary["n_boot"],
    ) == ("holm", "worker", "conversation", "conservative", 30)
    tests = pd.read_csv(out / "survival_tests.csv")
    assert set(tests["correction"]) == {"holm"} and set(tests["variance"]) == {"robust (worker)"}
    for args, match in [
        (["--trueskill-tau", "-1"], "tau"),
        (["--draw-probability", "1.5"], "draw_probability"),
        (["--cluster", "rating"], "does not apply"),
    ]:
        bad_run = CliRunner().invoke(
            main, ["analyze", "spot_the_bot", str(tmp_path), "--out", str(out), "--no-progress", *args]
        )
        assert bad_run.exit_code != 0 and match in bad_run.output, bad_run.output
    refused = CliRunner().invoke(
        main, ["analyze", "pairwise", str(tmp_path), "--out", str(out), "--trueskill-tau", "0"]
    )
    assert refused.exit_code != 0 and "spot_the_bot` only" in refused.output


def _study_file(tmp_path, trueskill: dict):
    import yaml

    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "study": "stb",
                "task": "spot_the_bot",
                "seed": 7,
                "budget": "1.00",
                "systems": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
                "spot_the_bot": {"trueskill": trueskill},
            }
        )
    )
    return path


def test_trueskill_settings_from_the_study_file_reach_analyze_the_summary_and_the_methods(tmp_path):
    from click.testing import CliRunner

    from hitkit.cli import main
    from hitkit.report import ReportInput, methods_paragraph
    from hitkit.report.analyze import run_analysis
    from hitkit.study.loading import load_study

    ann = frame(
        segment("w1", "c1", "A", "B", "human", "bot"),
        segment("w2", "c1", "A", "B", "human", "human"),
        segment("w3", "c2", "B", "C", "human", "bot"),
        segment("w4", "c3", "A", "C", "unsure", "bot"),
    )
    write_study(tmp_path, ann)
    study = _study_file(tmp_path, {"mu": 30, "tau": 0.1, "draw_probability": 0.2})
    config = load_study(study)
    result = run_analysis("spot_the_bot", tmp_path, config=config, options={"n_boot": 20})
    assert result.summary["trueskill"] == {
        "mu": 30.0,
        "sigma": 10.0,
        "beta": 5.0,
        "tau": 0.1,
        "draw_probability": 0.2,
        "draw_probability_source": "given",
    }
    methods = methods_paragraph(ReportInput("spot_the_bot", result.tables, result.summary))
    assert "μ = 30.0, σ = 10.000, β = 5.000, τ = 0.100, draw probability 0.200" in methods

    # `hitkit analyze --study`: the study's settings and seed, one setting overridden on the command line.
    out = tmp_path / "out"
    run = CliRunner().invoke(
        main,
        [
            "analyze",
            "spot_the_bot",
            str(tmp_path),
            "--out",
            str(out),
            "--no-progress",
            "--study",
            str(study),
            "--n-boot",
            "20",
            "--draw-probability",
            "observed",
        ],
    )
    assert run.exit_code == 0, run.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["trueskill"]["mu"], summary["trueskill"]["tau"], summary["seed"]) == (30.0, 0.1, 7)
    assert summary["trueskill"]["draw_probability_source"] == "observed tie rate"
    # Without a study file nothing changes: the defaults (tau 0, observed tie rate).
    assert run_analysis("spot_the_bot", tmp_path, options={"n_boot": 20}).summary["trueskill"]["mu"] == 25.0


def test_a_bad_trueskill_setting_in_the_study_file_is_refused_with_the_field():
    from hitkit.protocols.spot_the_bot.settings import TrueSkillConfig

    with pytest.raises(ValueError, match="draw_probability is 1.0"):
        TrueSkillConfig(draw_probability=1.0)
    with pytest.raises(ValueError, match="tau"):
        TrueSkillConfig(tau=-0.5)
    assert TrueSkillConfig().settings() == TrueSkillConfig(draw_probability="observed").settings()
