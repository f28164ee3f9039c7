"""`hitkit analyze pairwise DIR --judge-labels FILE`: reading a tidy judge-labels file (clear errors naming
file and line), several judges with their calibration, and the analysis on a small export."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from hitkit.analysis.judge_labels import read_judge_labels
from hitkit.analysis.judges_combined import calibration, cross_fitted_best, expected_calibration_error
from hitkit.cli import main
from hitkit.errors import InputError


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_and_jsonl_give_the_same_labels(tmp_path):
    csv = _write(tmp_path / "l.csv", "unit,judge,label,confidence\n1,gpt,a,0.9\n1,gpt,0.25,\n2,llama,TIE,\n")
    jsonl = _write(
        tmp_path / "l.jsonl",
        '{"unit": 1, "judge": "gpt", "label": "a", "confidence": 0.9}\n'
        '{"unit": "1", "judge": "gpt", "label": 0.25}\n\n{"unit": 2, "judge": "llama", "label": "tie"}\n',
    )
    a, b = read_judge_labels(csv), read_judge_labels(jsonl)
    assert a["score"].tolist() == b["score"].tolist() == [1.0, 0.25, 0.5]
    assert a["unit"].tolist() == ["1", "1", "2"] and a["confidence"].iloc[0] == 0.9
    assert np.isnan(a["confidence"].iloc[1]) and np.isnan(b["confidence"].iloc[2])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("unit,judge\n1,gpt\n", r"missing column\(s\) \['label'\]"),
        ("unit,judge,label\n1,gpt,a\n2,gpt,maybe\n", r"line 3: label 'maybe' is not a, b, tie or a number in \[0, 1\]"),
        ("unit,judge,label\n1,gpt,1.5\n", r"line 2: label '1.5' is not"),
        ("unit,judge,label\n1,,a\n", r"line 2: judge is empty"),
        ("unit,judge,label,confidence\n1,gpt,a,high\n", r"line 2: confidence 'high' is not a number in \[0, 1\]"),
        (
            "unit,judge,label,human_probability\n1,gpt,a,0\n",
            r"line 2: human_probability '0' is not a number in \(0, 1\]",
        ),
        ("unit,judge,label,system_a\n1,gpt,a,x\n", r"line 2: gives one of system_a and system_b"),
        (
            "unit,judge,label,human_probability\n1,gpt,a,0.5\n1,llama,b,0.2\n",
            r"unit '1' has more than one human_probability",
        ),
        ("", r"is empty"),
    ],
)
def test_bad_judge_labels_say_what_and_where(tmp_path, text, message):
    path = _write(tmp_path / "labels.csv", text)
    with pytest.raises(InputError, match=message) as info:
        read_judge_labels(path)
    assert "labels.csv" in str(info.value)


def test_a_broken_json_line_is_named(tmp_path):
    path = _write(tmp_path / "labels.jsonl", '{"unit": 1, "judge": "g", "label": "a"}\n{"unit": 2,\n')
    with pytest.raises(InputError, match=r"labels.jsonl line 2: is not JSON"):
        read_judge_labels(path)


def test_calibration_measures_agreement_and_ece():
    human = pd.Series([1.0, 0.0, 1.0, 0.0, np.nan])
    scores = pd.DataFrame(
        {"sure": [1.0, 0.0, 1.0, 0.0, 1.0], "flat": [0.5] * 5, "overconfident": [1.0, 1.0, 1.0, 1.0, 0.0]}
    )
    table = calibration(scores, human).set_index("judge")
    assert table.loc["sure", "agreement"] == 1.0 and table.loc["sure", "ece"] == 0.0
    # Calibrated but useless: never names the people's winner, yet its ½ is right on average.
    assert table.loc["flat", "agreement"] == 0.0 and table.loc["flat", "ece"] == 0.0
    assert table.loc["overconfident", "agreement"] == 0.5 and table.loc["overconfident", "ece"] == pytest.approx(0.5)
    assert table.loc["sure", "n_human"] == 4 and table.loc["sure", "n_items"] == 5
    assert expected_calibration_error([1, 1, 0, 0], [0.9, 0.9, 0.1, 0.1]) == pytest.approx(0.1)


def test_the_better_judge_is_chosen_on_held_out_labels():
    rng = np.random.default_rng(8)
    x = rng.random(400)
    human = pd.Series(np.where(rng.random(400) < 0.5, (rng.random(400) < x).astype(float), np.nan))
    scores = pd.DataFrame({"good": np.clip(x + rng.normal(0, 0.05, 400), 0, 1), "noise": rng.random(400)})
    combined, chosen = cross_fitted_best(scores, human, [str(i) for i in range(400)], seed=1)
    assert chosen == {"good": 2} and np.allclose(combined, scores["good"])


def _write_tables(folder, rows, assignments):
    """votes.csv and assignments.csv of a pairwise export folder."""
    pd.DataFrame(
        rows, columns=["study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a", "system_b", "vote"]
    ).to_csv(folder / "votes.csv", index=False)
    pd.DataFrame(
        assignments, columns=["study", "hit_id", "assignment_id", "worker_id", "status", "work_time_s"]
    ).to_csv(folder / "assignments.csv", index=False)


def _export(folder, rng, items=60, voted=24):
    """A small pairwise export: two systems, ``voted`` of ``items`` prompts with three votes each."""
    folder.mkdir()
    truth = rng.random(items) < 0.7  # alpha better on 70 % of prompts
    rows, assignments = [], []
    for i in range(voted):
        for w in range(3):
            vote = "a" if (rng.random() < 0.85) == truth[i] else "b"
            rows.append(("s", f"h{i}", f"as{i}-{w}", f"w{w}", str(i), "alpha", "beta", vote))
            assignments.append(("s", f"h{i}", f"as{i}-{w}", f"w{w}", "approved", "60"))
    _write_tables(folder, rows, assignments)
    return truth


def test_analyze_with_judge_labels_reports_win_rates_and_each_judges_calibration(tmp_path):
    rng = np.random.default_rng(11)
    truth = _export(tmp_path / "export", rng)
    lines = ["unit,judge,label,system_a,system_b"]
    for i, better in enumerate(truth):
        for order in ("ab", "ba"):
            good = "a" if (rng.random() < 0.9) == better else "b"
            # The file may read a pair either way round: the second order names beta first.
            lines.append(
                f"{i},good,{good if order == 'ab' else {'a': 'b', 'b': 'a'}[good]},"
                f"{'alpha,beta' if order == 'ab' else 'beta,alpha'}"
            )
        lines.append(f"{i},coin,{'a' if rng.random() < 0.5 else 'b'},,")
    labels = _write(tmp_path / "labels.csv", "\n".join(lines) + "\n")
    out = tmp_path / "analysis"
    result = CliRunner().invoke(
        main, ["analyze", "pairwise", str(tmp_path / "export"), "--out", str(out), "--judge-labels", str(labels)]
    )
    assert result.exit_code == 0, result.output
    rates = pd.read_csv(out / "judge_win_rates.csv")
    assert rates[["system_a", "system_b", "n_human", "n_judge"]].values.tolist() == [["alpha", "beta", 24, 60]]
    assert rates["ppi_low"].iloc[0] <= rates["ppi"].iloc[0] <= rates["ppi_high"].iloc[0]
    calib = pd.read_csv(out / "judge_calibration.csv").set_index("judge")
    assert set(calib.index) == {"good", "coin"}
    assert calib.loc["good", "agreement"] > calib.loc["coin", "agreement"]
    assert calib.loc["good", "n_human"] == 24 and calib.loc["good", "n_items"] == 60
    summary = json.loads((out / "summary.json").read_text())["judge"]
    assert summary["judges"] == ["coin", "good"] and summary["selection"] == "uniform"
    assert summary["chosen"] == {"good": 2} and summary["human_items"] == 24
    assert (out / "judge_strengths.csv").is_file()
    # the report shows each judge's calibration and which one the estimates used
    from hitkit.report import report

    html = report(out, tmp_path / "report").html.read_text()
    assert "Each judge&#x27;s calibration against people" in html or "Each judge's calibration against people" in html
    assert "chosen: good (2 of 2 halves)" in html


def test_analyze_with_human_probability_uses_inverse_probability_weights(tmp_path):
    rng = np.random.default_rng(12)
    truth = _export(tmp_path / "export", rng)
    lines = ["unit,judge,label,human_probability"]
    for i, better in enumerate(truth):
        lines.append(f"{i},good,{'a' if (rng.random() < 0.9) == better else 'b'},{0.6 if i < 30 else 0.2}")
    labels = _write(tmp_path / "labels.csv", "\n".join(lines) + "\n")
    out = tmp_path / "analysis"
    result = CliRunner().invoke(
        main, ["analyze", "pairwise", str(tmp_path / "export"), "--out", str(out), "--judge-labels", str(labels)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"]["selection"].startswith("uncertainty") and "Zrnic" in summary["judge"]["estimator"]
    rates = pd.read_csv(out / "judge_win_rates.csv")
    assert rates["n_human"].iloc[0] == 24 and 0 <= rates["ppi"].iloc[0] <= 1
    strengths = pd.read_csv(out / "judge_strengths.csv")  # weighted Bradley–Terry too
    assert len(strengths) == 2 and (strengths["ppi_low"] <= strengths["ppi_high"]).all()
    assert "inverse-probability weights" in summary["judge"]["strengths_estimator"]


def test_judge_labels_for_another_task_is_refused(tmp_path):
    (tmp_path / "export").mkdir()
    labels = _write(tmp_path / "labels.csv", "unit,judge,label\n1,g,a\n")
    result = CliRunner().invoke(
        main,
        ["analyze", "ranking", str(tmp_path / "export"), "--out", str(tmp_path / "o"), "--judge-labels", str(labels)],
    )
    assert result.exit_code != 0 and "--judge-labels applies to `analyze pairwise / " in result.output


def _mt_bench_like(folder, rng, questions=40, share=0.3):
    """An export in the shape of released pairwise judgments (MT-Bench's human judgments): every question
    answered by three systems, so a unit (question) holds three pairs; people voted on a random ``share`` of
    the (question, pair) comparisons, a judge on all of them. Returns each comparison's true winner."""
    folder.mkdir(parents=True)
    strength = {"alpha": 0.8, "beta": 0.0, "gamma": -0.8}
    rows, assignments, truth = [], [], {}
    for q in range(questions):
        for a, b in (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")):
            p = 1 / (1 + np.exp(-(strength[a] - strength[b] + rng.normal(0, 0.5))))
            truth[(str(q), a, b)] = p
            if rng.random() >= share:
                continue
            for _ in range(2):
                # displayed either way round, as released data are
                first, second = (a, b) if rng.random() < 0.5 else (b, a)
                won = a if rng.random() < p else b
                n = len(assignments)
                rows.append(("s", f"h{n}", f"as{n}", f"w{n % 7}", str(q), first, second, "a" if won == first else "b"))
                assignments.append(("s", f"h{n}", f"as{n}", f"w{n % 7}", "approved", "60"))
    _write_tables(folder, rows, assignments)
    return truth


def test_a_unit_holding_several_pairs_is_judged_per_pair_as_released_judgments_are(tmp_path):
    """Released pairwise data key a judgment by question and pair (MT-Bench: question_id, model_a, model_b):
    each (unit, pair) is its own comparison, read either way round, voted on or not."""
    rng = np.random.default_rng(21)
    truth = _mt_bench_like(tmp_path / "export", rng)
    lines = ["unit,judge,label,system_a,system_b"]
    for (q, a, b), p in truth.items():
        won_a = rng.random() < (0.9 * (p > 0.5) + 0.05)
        lines.append(f"{q},gpt,{'b' if won_a else 'a'},{b},{a}")  # named the other way round
    labels = _write(tmp_path / "labels.csv", "\n".join(lines) + "\n")
    out = tmp_path / "analysis"
    result = CliRunner().invoke(
        main, ["analyze", "pairwise", str(tmp_path / "export"), "--out", str(out), "--judge-labels", str(labels)]
    )
    assert result.exit_code == 0, result.output
    rates = pd.read_csv(out / "judge_win_rates.csv").set_index(["system_a", "system_b"])
    assert sorted(rates.index) == [("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]
    assert (rates["n_judge"] == 40).all()
    voted = pd.read_csv(tmp_path / "export" / "votes.csv")
    per_pair = (
        voted.assign(pair=[tuple(sorted(x)) for x in zip(voted["system_a"], voted["system_b"])])
        .drop_duplicates(["item_id", "pair"])["pair"]
        .value_counts()
    )
    for pair, n in per_pair.items():
        assert rates.loc[pair, "n_human"] == n
    assert (rates["ppi"] > 0.5).all()  # alpha over beta, alpha over gamma, beta over gamma


def test_a_bare_label_for_a_unit_with_several_pairs_says_which_pairs(tmp_path):
    rng = np.random.default_rng(22)
    _mt_bench_like(tmp_path / "export", rng, share=1.0)
    labels = _write(tmp_path / "labels.csv", "unit,judge,label\n0,gpt,a\n")
    out = tmp_path / "analysis"
    result = CliRunner().invoke(
        main, ["analyze", "pairwise", str(tmp_path / "export"), "--out", str(out), "--judge-labels", str(labels)]
    )
    assert result.exit_code != 0
    assert "line 2" in result.output and "compares several pairs" in result.output
    assert "alpha vs beta, alpha vs gamma, beta vs gamma" in result.output
    assert "give the row's system_a and system_b" in result.output


def test_a_pair_of_a_system_with_itself_is_refused_with_its_line(tmp_path):
    rng = np.random.default_rng(23)
    _mt_bench_like(tmp_path / "export", rng)
    labels = _write(
        tmp_path / "labels.csv", "unit,judge,label,system_a,system_b\n0,gpt,a,alpha,beta\n0,gpt,a,beta,beta\n"
    )
    result = CliRunner().invoke(
        main,
        ["analyze", "pairwise", str(tmp_path / "export"), "--out", str(tmp_path / "a"), "--judge-labels", str(labels)],
    )
    assert result.exit_code != 0 and "line 3: compares 'beta' with itself" in result.output
