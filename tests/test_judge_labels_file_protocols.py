"""``hitkit analyze TASK DIR --judge-labels FILE`` for the protocols beyond pairwise: the file's labels
give the estimates of the protocol's own judge analysis on the same data, a constant human_probability
gives the people-only estimates of the uniform case, several judges are combined with each one's
calibration, and a bad file is refused naming the file, its line and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hitkit.errors import InputError
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA

CRITERIA = [c for c in DEFAULT_CRITERIA if c.name in ("interesting", "fun")]
PASSED = {f"w{i}" for i in range(4)}


def _cells(frame: pd.DataFrame, row: int, **values) -> pd.DataFrame:
    """``frame`` with the given columns' cells of one row replaced (a bad row for a test)."""
    return frame.assign(**{c: frame[c].astype(object).where(frame.index != row, v) for c, v in values.items()})


def _write(path, frame: pd.DataFrame):
    frame.to_csv(path, index=False)
    return path


def _chat(rng, conversations: int = 40):
    """Live chat's standardised ratings (two in three conversations rated) and a judge.csv of every one."""
    rows, judged = [], []
    for c in range(conversations):
        worker, system = f"w{c % 4}", ("anna", "bert")[c % 2]
        quality = rng.normal(0.3 if system == "anna" else -0.3, 1)
        for criterion in ("interesting", "fun"):
            if c % 3:
                z = quality + rng.normal(0, 0.5)
                rows.append((f"c{c}", worker, system, criterion, False, z))
            judged.append(
                (f"c{c}", worker, system, criterion, float(np.clip(50 + 20 * quality + rng.normal(0, 8), 0, 100)))
            )
    z = pd.DataFrame(rows, columns=["conversation_id", "worker_id", "system", "criterion", "is_control", "z"])
    judge = pd.DataFrame(judged, columns=["conversation_id", "worker_id", "system", "criterion", "score"])
    judge = judge.assign(parsed=True, human_subset=judge["conversation_id"].isin(set(z["conversation_id"])), model="m")
    return z, judge


def _chat_file(judge: pd.DataFrame, **extra) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unit": judge["conversation_id"],
            "judge": judge["model"],
            "criterion": judge["criterion"],
            "label": judge["score"],
            "system": judge["system"],
            **extra,
        }
    )


def test_live_chat_file_gives_the_built_in_judges_scores(tmp_path):
    from hitkit.protocols.live_chat.judge import analysis_tables
    from hitkit.protocols.live_chat.judge_file import analysis_tables_from_file

    z, judge = _chat(np.random.default_rng(1))
    own, _, _ = analysis_tables(z, judge, CRITERIA, PASSED)
    path = _write(tmp_path / "labels.csv", _chat_file(judge))
    tables, summary, lines = analysis_tables_from_file(z, path, CRITERIA, PASSED)
    for name in ("judge_scores", "judge_bias"):
        pd.testing.assert_frame_equal(tables[name], own[name], check_exact=False, rtol=1e-9, atol=1e-12)
    assert summary["judges"] == ["m"] and summary["selection"] == "uniform" and lines == []
    calib = tables["judge_calibration"].set_index("judge")
    assert calib.loc["m", "n_human"] == len(z) and 0.5 < calib.loc["m", "agreement"] <= 1


def test_live_chat_constant_probability_gives_the_uniform_people_only_estimates(tmp_path):
    from hitkit.protocols.live_chat.judge_file import analysis_tables_from_file

    z, judge = _chat(np.random.default_rng(2))
    uniform, _, _ = analysis_tables_from_file(z, _write(tmp_path / "u.csv", _chat_file(judge)), CRITERIA, PASSED)
    path = _write(tmp_path / "w.csv", _chat_file(judge, human_probability=0.4))
    weighted, summary, _ = analysis_tables_from_file(z, path, CRITERIA, PASSED)
    assert summary["selection"].startswith("uncertainty")
    a, b = uniform["judge_scores"], weighted["judge_scores"]
    for column in ("system", "criterion", "n_human", "n_judge", "human", "human_low", "human_high", "judge"):
        assert (
            a[column].tolist() == pytest.approx(b[column].tolist())
            if a[column].dtype.kind == "f"
            else (a[column].tolist() == b[column].tolist())
        )
    # With one π for all, the weighted estimate is PPI++'s ȳ_h + λ (f̄_all − f̄_h) at its own λ.
    assert (b["ppi_low"] <= b["ppi"]).all() and (b["ppi"] <= b["ppi_high"]).all()


def test_live_chat_several_judges_are_combined_and_calibrated(tmp_path):
    from hitkit.protocols.live_chat.judge_file import analysis_tables_from_file

    rng = np.random.default_rng(3)
    z, judge = _chat(rng)
    noise = judge.assign(model="coin", score=rng.uniform(0, 100, len(judge)))
    both = pd.concat([_chat_file(judge, confidence=0.9), _chat_file(noise, confidence=0.9)])
    tables, summary, _ = analysis_tables_from_file(z, _write(tmp_path / "l.csv", both), CRITERIA, PASSED)
    calib = tables["judge_calibration"].set_index("judge")
    assert summary["judges"] == ["coin", "m"] and calib.loc["m", "agreement"] > calib.loc["coin", "agreement"]
    assert calib.loc["coin", "ece"] > calib.loc["m", "ece"]  # both claim 0.9; the coin is right half the time
    assert summary["chosen"].get("m", 0) + summary["chosen"].get("mean of judges", 0) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: _cells(f, 3, unit="nope", system=""),
            r"line 5: unit 'nope' \(column unit\) is not a conversation of ratings.csv",
        ),
        (lambda f: f.assign(label=f["label"].astype(object).where(f.index != 2, "high")), r"line 4: label 'high'"),
        (lambda f: f.assign(label=f["label"].where(f.index != 2, 101.0)), r"line 4: label '101.0' is not a number"),
        (lambda f: f.drop(columns="criterion"), r"missing column\(s\) \['criterion'\]"),
        (lambda f: f.assign(criterion="funny"), r"line 2: criterion 'funny' is not one of"),
        (lambda f: f.assign(human_probability=1.5), r"line 2: human_probability '1.5' is not a number in \(0, 1\]"),
        (lambda f: f.assign(human_probability=0), r"line 2: human_probability '0' is not"),
    ],
)
def test_live_chat_bad_file_names_file_line_and_column(tmp_path, change, message):
    from hitkit.protocols.live_chat.judge_file import analysis_tables_from_file

    z, judge = _chat(np.random.default_rng(4), conversations=8)
    path = _write(tmp_path / "labels.csv", change(_chat_file(judge)))
    with pytest.raises(InputError, match=message) as info:
        analysis_tables_from_file(z, path, CRITERIA, PASSED)
    assert "labels.csv" in str(info.value)


def _rating_export(folder, rng):
    """tests/test_rating.py's synthetic export with the last three items rated for alpha only: the
    other systems' responses to them are judged and not rated."""
    from hitkit.protocols.rating.scores import DEFAULT_CRITERIA as RATED
    from tests.test_rating import _synthetic_export

    folder.mkdir()
    _synthetic_export(folder)
    path = folder / "da_ratings.csv"
    ratings = pd.read_csv(path, dtype=str)
    unrated = ratings["item_id"].isin(["q5", "q6", "q7"]) & (ratings["system"] != "alpha")
    ratings[~(unrated & (ratings["is_control"] == "0"))].to_csv(path, index=False)
    quality = {"alpha": 0.8, "beta": 0.5, "gamma": 0.2}
    rows = [
        (f"q{i}", system, c.name, float(np.clip(100 * q + rng.normal(0, 10), 0, 100)))
        for i in range(8)
        for system, q in quality.items()
        for c in RATED
    ]
    labels = pd.DataFrame(rows, columns=["unit", "system", "criterion", "label"]).assign(judge="g")
    labels["label"] = labels["label"].where(
        labels["criterion"].map({c.name: c.polarity for c in RATED}) == "positive", 100 - labels["label"]
    )
    return labels


def test_rating_cli_reads_judge_labels_and_weights_by_human_probability(tmp_path):
    import json

    from click.testing import CliRunner

    from hitkit.cli import main

    labels = _rating_export(tmp_path / "export", np.random.default_rng(5))
    for name, extra in (("uniform", {}), ("weighted", {"human_probability": 0.5})):
        path = _write(tmp_path / f"{name}.csv", labels.assign(**extra))
        out = tmp_path / name
        args = ["analyze", "rating", str(tmp_path / "export"), "--out", str(out), "--judge-labels", str(path)]
        result = CliRunner().invoke(main, [*args, "--n-boot", "20"])
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out / "judge_scores.csv")
        overall = table[table["criterion"] == "overall"].set_index("system")
        assert overall["n_judge"].tolist() == [8, 8, 8] and overall["n_human"].tolist() == [8, 5, 5]
        assert (table["ppi_low"] <= table["ppi"]).all() and (table["ppi"] <= table["ppi_high"]).all()
        assert overall.loc["alpha", "ppi"] > overall.loc["gamma", "ppi"]
        summary = json.loads((out / "summary.json").read_text())["judge"]
        assert summary["judges"] == ["g"] and summary["human_conversations"] == 18
        assert (out / "judge_calibration.csv").is_file()
    uniform, weighted = (pd.read_csv(tmp_path / n / "judge_scores.csv") for n in ("uniform", "weighted"))
    assert uniform["human"].tolist() == pytest.approx(weighted["human"].tolist())
    assert uniform["human_low"].tolist() == pytest.approx(weighted["human_low"].tolist())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.assign(system=f["system"].where(f.index != 1, "delta")), r"line 3: system 'delta' is not"),
        (lambda f: f.assign(system=f["system"].where(f.index != 1, "")), r"line 3: system is empty"),
    ],
)
def test_rating_bad_file_names_file_line_and_column(tmp_path, change, message):
    from hitkit.analysis.judge_labels import read_judge_labels
    from hitkit.protocols.live_chat.judge_file import SCALE
    from hitkit.protocols.rating.analysis import as_chat_ratings
    from hitkit.protocols.rating.judge_file import response_keys

    labels = _rating_export(tmp_path / "export", np.random.default_rng(6))
    ratings = as_chat_ratings(pd.read_csv(tmp_path / "export" / "da_ratings.csv", dtype={"item_id": str}))
    path = _write(tmp_path / "labels.csv", change(labels))
    raw = read_judge_labels(path, SCALE, required=("criterion",), optional=("system", "worker_id"))
    with pytest.raises(InputError, match=message) as info:
        response_keys(ratings, path)(raw)
    assert "labels.csv" in str(info.value)


def test_rating_a_response_nobody_rated_is_one_only_the_judge_rated(tmp_path):
    """Released ratings: the judge rated every response, people a share; a row for an item nobody rated
    names its system, so it is that response (the judge's alone), not an error."""
    from hitkit.analysis.judge_labels import read_judge_labels
    from hitkit.protocols.live_chat.judge_file import SCALE
    from hitkit.protocols.rating.analysis import as_chat_ratings
    from hitkit.protocols.rating.judge_file import response_keys

    labels = _rating_export(tmp_path / "export", np.random.default_rng(6))
    ratings = as_chat_ratings(pd.read_csv(tmp_path / "export" / "da_ratings.csv", dtype={"item_id": str}))
    path = _write(tmp_path / "labels.csv", _cells(labels, 4, unit="q99"))
    raw = read_judge_labels(path, SCALE, required=("criterion",), optional=("system", "worker_id"))
    keys = response_keys(ratings, path)(raw)
    assert keys.iloc[4] == f"q99/{raw['system'].iloc[4]}"


def _arena(folder, rng, battles: int = 90, voted: int = 50):
    """battles.csv with ``voted`` of ``battles`` real battles voted (three systems) and a judge-labels
    frame of every battle, the unvoted ones named by their pair."""
    from hitkit.protocols.arena.columns import BATTLE_COLUMNS

    folder.mkdir()
    strength = {"anna": 1.0, "bert": 0.0, "cleo": -0.6}
    names = list(strength)
    rows, labels = [], []
    for i in range(battles):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + np.exp(strength[b] - strength[a]))
        truth = rng.random() < p
        if i < voted:
            vote = ("a" if truth else "b") if rng.random() < 0.9 else "tie"
            row = dict.fromkeys(BATTLE_COLUMNS, "")
            row.update(study="s", hit_id=f"h{i}", assignment_id=str(i), worker_id=f"w{i % 5}", battle_id=f"b{i}")
            row.update(prompt_id=f"p{i}", category="", turns=1, system_a=a, system_b=b, vote=vote, reason="")
            row.update({c: 0 for c in BATTLE_COLUMNS if c.startswith(("tokens", "header", "list", "bold"))})
            rows.append({**row, "is_control": 0, "leak": 0})
        judged = "a" if (rng.random() < 0.85) == truth else "b"
        labels.append((f"b{i}", "g", judged, a, b))
    pd.DataFrame(rows, columns=list(BATTLE_COLUMNS)).to_csv(folder / "battles.csv", index=False)
    return pd.DataFrame(labels, columns=["unit", "judge", "label", "system_a", "system_b"])


def _arena_items(labels: pd.DataFrame, folder) -> pd.DataFrame:
    battles = pd.read_csv(folder / "battles.csv", dtype=str)
    vote = battles.set_index("battle_id")["vote"].map({"a": 1.0, "b": 0.0, "tie": 0.5})
    judge = labels["label"].map({"a": 1.0, "b": 0.0})
    return pd.DataFrame(
        {
            "system_a": labels["system_a"],
            "system_b": labels["system_b"],
            "human": labels["unit"].map(vote),
            "judge": judge,
        }
    )


def _analyze(task, folder, labels_path, out):
    from click.testing import CliRunner

    from hitkit.cli import main

    args = ["analyze", task, str(folder), "--out", str(out), "--judge-labels", str(labels_path), "--n-boot", "20"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_arena_file_gives_pairwise_ppi_win_rates_and_strengths(tmp_path):
    import json

    from hitkit.analysis import ppi, ppi_bradley_terry

    labels = _arena(tmp_path / "export", np.random.default_rng(7))
    out = _analyze("arena", tmp_path / "export", _write(tmp_path / "l.csv", labels), tmp_path / "o")
    items = _arena_items(labels, tmp_path / "export")
    rates = pd.read_csv(out / "judge_win_rates.csv")
    expected = ppi.win_rates(items)
    pd.testing.assert_frame_equal(rates, expected, check_exact=False, rtol=1e-9, check_dtype=False)
    strengths = pd.read_csv(out / "judge_strengths.csv")
    own = ppi_bradley_terry.strengths(items.assign(votes=items["human"].notna().astype(int)), prior=1.0)
    assert strengths["system"].tolist() == own["system"].tolist()
    assert strengths["ppi"].tolist() == pytest.approx(own["ppi"].tolist(), rel=1e-9)
    summary = json.loads((out / "summary.json").read_text())["judge"]
    assert summary["items"] == 90 and summary["human_items"] == 50 and summary["selection"] == "uniform"
    assert pd.read_csv(out / "judge_calibration.csv")["judge"].tolist() == ["g"]


def test_arena_constant_probability_gives_the_uniform_people_only_win_rates(tmp_path):
    labels = _arena(tmp_path / "export", np.random.default_rng(8))
    uniform = _analyze("arena", tmp_path / "export", _write(tmp_path / "u.csv", labels), tmp_path / "u")
    path = _write(tmp_path / "w.csv", labels.assign(human_probability=0.55))
    weighted = _analyze("arena", tmp_path / "export", path, tmp_path / "w")
    a, b = (pd.read_csv(o / "judge_win_rates.csv") for o in (uniform, weighted))
    for column in ("n_human", "n_judge", "human", "human_low", "human_high", "judge"):
        assert a[column].tolist() == pytest.approx(b[column].tolist())
    s = pd.read_csv(weighted / "judge_strengths.csv")
    assert (s["ppi_low"] <= s["ppi"]).all() and (s["ppi"] <= s["ppi_high"]).all()
    # the arena's report shows the judge's section, worded for the weighted draw and the file
    from hitkit.report import report

    text = report(weighted, tmp_path / "report").markdown.read_text()
    assert "## People and the LLM judge" in text and "The judge labels come from" in text
    assert "drawn with known, unequal probabilities" in text and "uniformly random" not in text
    assert "calibration against people" in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: _cells(f, 70, system_a="", system_b=""),
            r"line 72: unit 'b70' \(column unit\) is not a battle of battles.csv",
        ),
        (lambda f: f.assign(label=f["label"].where(f.index != 3, "left")), r"line 5: label 'left' is not a, b, tie"),
        (lambda f: f.drop(columns="judge"), r"missing column\(s\) \['judge'\]"),
        (lambda f: f.assign(human_probability=-0.1), r"line 2: human_probability '-0.1' is not a number in \(0, 1\]"),
    ],
)
def test_arena_bad_file_names_file_line_and_column(tmp_path, change, message):
    from hitkit.protocols.arena.judge_file import analysis_tables_from_file

    labels = _arena(tmp_path / "export", np.random.default_rng(9))
    battles = pd.read_csv(tmp_path / "export" / "battles.csv", dtype=str)
    path = _write(tmp_path / "labels.csv", change(labels))
    with pytest.raises(InputError, match=message) as info:
        analysis_tables_from_file(battles, battles, path)
    assert "labels.csv" in str(info.value)


def _stb(rng, conversations: int = 60, annotated: int = 36):
    """Spot The Bot annotations (two workers per segment of the first ``annotated`` conversations) and
    a judge.csv of every segment, both speakers; three systems of different humanness."""
    humanness = {"anna": 0.7, "bert": 0.45, "cleo": 0.2}
    names = list(humanness)

    def label(system):
        r = rng.random()
        p = humanness[system]
        return "human" if r < p else "unsure" if r < p + 0.15 else "bot"

    ann, judged = [], []
    for c in range(conversations):
        pair = rng.choice(names, 2, replace=False)
        for k in (1, 2, 3):
            for e, system in enumerate(pair):
                if c < annotated:
                    for w in range(2):
                        ann.append(("s", f"h{c}", f"as{c}-{w}", f"w{w}", f"c{c}", str(k), e, system, label(system)))
                judged.append(("s", f"c{c}", str(k), e, system, label(system), True, c < annotated, "m", ""))
    from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
    from hitkit.protocols.spot_the_bot.judge import JUDGE_COLUMNS

    annotations = pd.DataFrame(ann, columns=list(ANNOTATION_COLUMNS[:9]))  # study … label

    return annotations, pd.DataFrame(judged, columns=list(JUDGE_COLUMNS))


def _stb_file(judge: pd.DataFrame, **extra) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unit": judge["conversation_id"],
            "segment_exchanges": judge["segment_exchanges"],
            "speaker": judge["entity"].map({0: "A", 1: "B"}),
            "judge": judge["model"],
            "label": judge["label"],
            "system": judge["system"],
            **extra,
        }
    )


def test_spot_the_bot_file_gives_the_built_in_judges_win_rates(tmp_path):
    from hitkit.protocols.spot_the_bot.judge_analysis import analysis_tables
    from hitkit.protocols.spot_the_bot.judge_file import analysis_tables_from_file

    annotations, judge = _stb(np.random.default_rng(10))
    own, own_summary, _ = analysis_tables(annotations, judge)
    tables, summary, lines = analysis_tables_from_file(annotations, _write(tmp_path / "l.csv", _stb_file(judge)))
    for name in ("judge_win_rates", "judge_bias"):
        pd.testing.assert_frame_equal(tables[name], own[name], check_exact=False, rtol=1e-9, atol=1e-12)
    assert summary["judges"] == ["m"] and summary["selection"] == "uniform" and lines == []
    assert summary["human_conversations"] == own_summary["human_conversations"] == 36
    calib = tables["judge_calibration"].set_index("judge")
    assert calib.loc["m", "n_items"] == 60 * 3 * 2 and calib.loc["m", "n_human"] == 36 * 3 * 2


def test_spot_the_bot_constant_probability_gives_the_uniform_people_only_ratio(tmp_path):
    from hitkit.protocols.spot_the_bot.judge_file import analysis_tables_from_file

    annotations, judge = _stb(np.random.default_rng(11))
    uniform, _, _ = analysis_tables_from_file(annotations, _write(tmp_path / "u.csv", _stb_file(judge)))
    path = _write(tmp_path / "w.csv", _stb_file(judge, human_probability=0.6, confidence=0.8))
    weighted, summary, _ = analysis_tables_from_file(annotations, path)
    assert summary["selection"].startswith("uncertainty") and "Zrnic" in summary["estimator"]
    a, b = uniform["judge_win_rates"], weighted["judge_win_rates"]
    for column in ("system_a", "system_b", "n_human", "n_judge", "human", "judge", "judge_low", "judge_high"):
        assert b[column].tolist() == (
            pytest.approx(a[column].tolist()) if a[column].dtype.kind == "f" else a[column].tolist()
        )
    # The same human-only ratio; its interval the delta method's rather than the jackknife's: close.
    assert b["human_low"].tolist() == pytest.approx(a["human_low"].tolist(), abs=0.03)
    assert (b["ppi_low"] <= b["ppi"]).all() and (b["ppi"] <= b["ppi_high"]).all()
    assert weighted["judge_calibration"]["ece"].notna().all()


def test_spot_the_bot_several_judges_are_combined(tmp_path):
    from hitkit.protocols.spot_the_bot.judge_file import analysis_tables_from_file

    rng = np.random.default_rng(12)
    annotations, judge = _stb(rng)
    coin = judge.assign(model="coin", label=rng.choice(["human", "bot"], len(judge)))
    path = _write(tmp_path / "l.csv", pd.concat([_stb_file(judge), _stb_file(coin)]))
    tables, summary, _ = analysis_tables_from_file(annotations, path)
    calib = tables["judge_calibration"].set_index("judge")
    assert summary["judges"] == ["coin", "m"] and calib.loc["m", "agreement"] > calib.loc["coin", "agreement"]
    assert len(tables["judge_win_rates"]) == 3


def test_spot_the_bot_cli_reads_judge_labels(tmp_path):
    annotations, judge = _stb(np.random.default_rng(13))
    folder = tmp_path / "export"
    folder.mkdir()
    from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS

    full = annotations.assign(fluency=0, sensibleness=0, specificity=0, elapsed_s=10)
    full[list(ANNOTATION_COLUMNS)].to_csv(folder / "annotations.csv", index=False)
    out = _analyze("spot_the_bot", folder, _write(tmp_path / "l.csv", _stb_file(judge)), tmp_path / "o")
    assert len(pd.read_csv(out / "judge_win_rates.csv")) == 3 and (out / "judge_calibration.csv").is_file()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: _cells(f, 300, unit="c999", system=""),
            r"line 302: unit 'c999' \(column unit\) is not a conversation of annotations.csv",
        ),
        (lambda f: f.assign(speaker=f["speaker"].where(f.index != 2, "C")), r"line 4: speaker 'C' is not A or B"),
        (
            lambda f: f.assign(label=f["label"].where(f.index != 1, "robot")),
            r"line 3: label 'robot' is not human, unsure or bot",
        ),
        (lambda f: f.drop(columns="speaker"), r"missing column\(s\) \['speaker'\]"),
        (lambda f: f.assign(human_probability=2), r"line 2: human_probability '2' is not a number in \(0, 1\]"),
    ],
)
def test_spot_the_bot_bad_file_names_file_line_and_column(tmp_path, change, message):
    from hitkit.protocols.spot_the_bot.judge_file import analysis_tables_from_file

    annotations, judge = _stb(np.random.default_rng(14))
    path = _write(tmp_path / "labels.csv", change(_stb_file(judge)))
    with pytest.raises(InputError, match=message) as info:
        analysis_tables_from_file(annotations, path)
    assert "labels.csv" in str(info.value)


def test_the_weighted_ratio_with_lambda_zero_is_the_weighted_human_ratio():
    from hitkit.analysis.ppi_weighted_ratio import ipw_ratio

    rng = np.random.default_rng(15)
    z = rng.integers(1, 4, 200).astype(float)
    y = np.minimum(z, rng.integers(0, 4, 200))
    f, g = np.clip(y + rng.normal(0, 0.3, 200), 0, None), z
    pi = np.where(np.arange(200) < 100, 0.8, 0.3)
    labelled = rng.random(200) < pi
    est = ipw_ratio(y, z, f, g, labelled, pi)
    v = 1 / pi[labelled]
    assert est.human.estimate == pytest.approx((v * y[labelled]).sum() / (v * z[labelled]).sum())
    flat = ipw_ratio(y, z, f, g, labelled, 0.5)
    assert flat.human.estimate == pytest.approx(y[labelled].sum() / z[labelled].sum())
    assert est.lam > 0 and est.low < est.estimate < est.high and est.n == labelled.sum()
