"""`hitkit plan` for a pairwise study with an LLM judge: the crowd's share, sized by simulated studies analysed
with the real PPI++ code (hitkit/protocols/pairwise/judge_plan.py, judge_model.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from hitkit.analysis.ppi import win_rates
from hitkit.cli import main
from hitkit.protocols.pairwise import judge_model, judge_plan
from hitkit.study.loading import load_study
from tests.studies import pairwise_study
from tests.test_judge import judge_server, judged_study  # noqa: F401  (judge_server: a fixture)

CLOSE = {"alpha": 0.6, "beta": 0.5, "gamma": 0.4}
SYSTEMS = ["alpha", "beta", "gamma"]


def _study_file(tmp_path, prompts: int | None = None, quality=CLOSE, share: float = 0.3):
    """The example pairwise study with a judge (never called: a plan asks no judge), on ``prompts`` made-up
    prompts where given (more items per pair than the example's 30)."""
    changes = {}
    if prompts is not None:
        responses = tmp_path / "responses.jsonl"
        responses.write_text(
            "".join(
                json.dumps(
                    {
                        "id": f"p{i}",
                        "prompt": f"Question {i}?",
                        "responses": {s: f"{s} answers question {i}." for s in SYSTEMS},
                    }
                )
                + "\n"
                for i in range(prompts)
            )
        )
        changes["pairwise"] = {"responses": str(responses)}
    return pairwise_study(
        tmp_path,
        f"sqlite:///{tmp_path / 'x.db'}",
        simulated={"quality": quality},
        judge={"url": "http://127.0.0.1:9", "model": "j", "human_share": share},
        **changes,
    )


def _plan(config, agreement, **options):
    return judge_plan.plan(config, judge_model.assumed(agreement, {}, SYSTEMS), **options)


def test_the_command_prints_the_grid_the_estimator_and_the_assumption(tmp_path):
    study = _study_file(tmp_path)
    run = CliRunner().invoke(main, ["plan", str(study), "--replicates", "3", "--shares", "0.2,0.5,1"])
    assert run.exit_code == 0, run.output
    out = run.output
    assert "ASSUMED agreement 70% with the crowd" in out and "PPI++" in out and judge_plan.FORMULA in out
    table = pd.read_csv(tmp_path / "runs" / "ab-demo" / "plan" / "plan.csv")
    assert list(table["human_share"]) == [0.2, 0.5, 1.0]
    # 30 prompts x 3 pairs; each pair's share of its 30 items, 3 votes each; 0.50 a place on the simulated crowd.
    assert list(table["human_items"]) == [18, 45, 90] and list(table["human_votes"]) == [54, 135, 270]
    for column in ("half_width_human", "half_width_ppi", "n_effective", "closest_pair", "closest_pair_human"):
        assert table[column].notna().all(), column
    # All items voted on: nothing left for the judge, PPI is the people-only estimate.
    assert table["half_width_ppi"].iloc[-1] == table["half_width_human"].iloc[-1]
    assert table["n_effective"].iloc[-1] == table["n_human"].iloc[-1] == 30
    assert "Target: 80% power for: the two systems of closest quality differ" in out
    assert "- people only, from the same votes:" in out and "the study file's own share: 0.3" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["0.2", "0.5", "1.0"] and [r[1] for r in rows] == ["54", "135", "270"]
    as_json = json.loads(
        CliRunner()
        .invoke(
            main, ["plan", str(study), "--replicates", "2", "--shares", "0.5,1", "--judge-agreement", "0.9", "--json"]
        )
        .output
    )
    assert as_json["judge"] == {"agreement": 0.9, "source": "assumed", "lean": {}}
    assert as_json["unit"] == "human_share" and as_json["formula"] == judge_plan.FORMULA


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """150 prompts, 450 items: enough people-only uncertainty for the judge to matter."""
    return load_study(_study_file(tmp_path_factory.mktemp("big"), prompts=150))


SHARES = [0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 1.0]


def test_a_better_judge_needs_a_smaller_share_and_a_useless_one_the_people_only_share(big):
    width = 0.1
    plans = {p: _plan(big, p, replicates=6, shares=SHARES, width=width) for p in (0.5, 0.75, 0.95)}
    people = plans[0.5].people_only
    assert people is not None and 0.2 <= people < 1  # the target is within the grid for people alone
    assert {p.people_only for p in plans.values()} == {people}  # the same simulated votes for every judge
    # A coin: no better than people alone (at most one grid step either way).
    assert abs(SHARES.index(plans[0.5].recommended) - SHARES.index(people)) <= 1
    assert plans[0.95].recommended < plans[0.75].recommended <= people
    good = plans[0.95].table.set_index("human_share")
    assert good.loc[0.2, "n_effective"] > 1.5 * good.loc[0.2, "n_human"]
    assert good.loc[0.2, "half_width_ppi"] < 0.85 * good.loc[0.2, "half_width_human"]


def test_the_simulated_ppi_width_follows_the_sizing_formula(big):
    table = _plan(big, 0.9, replicates=4, shares=[0.3, 0.5]).table
    # Var_PPI ≈ Var_human/n (1 − ρ² N_u/(n + N_u)): within 10 % of the simulated jackknife t width at 45-75
    # human items a pair (the formula is the asymptotic variance with the best λ; the interval re-estimates λ).
    ratio = table["half_width_ppi"] / table["half_width_formula"]
    assert ((ratio > 0.95) & (ratio < 1.1)).all(), table
    assert (table["rho"] > 0.6).all()
    # ... and the formula's gain is real: well below the people-only width.
    gain = table["half_width_formula"] / table["half_width_human"]
    assert gain.iloc[0] < 0.85 and gain.iloc[0] < gain.iloc[1] < 0.95, table


def test_the_corrected_intervals_are_win_rates_at_the_bonferroni_level():
    rng = np.random.default_rng(3)
    n = 90
    items = pd.DataFrame(
        {
            "system_a": rng.choice(["a", "b"], n),
            "system_b": "c",
            "judge": rng.random(n).round(1),
            "human": np.where(rng.random(n) < 0.4, rng.integers(0, 2, n), np.nan),
        }
    )
    columns = ["human_low", "human_high", "ppi_low", "ppi_high"]
    got = judge_plan.corrected(win_rates(items), 3)[columns].to_numpy()
    assert np.allclose(got, win_rates(items, level=1 - 0.05 / 3)[columns].to_numpy(), atol=1e-12)


def test_the_simulated_judge_agrees_and_leans_as_told():
    rng = np.random.default_rng(0)
    reference = rng.choice([0.0, 1.0], 20_000)
    pair = rng.integers(0, 2, reference.size)
    judge = judge_model.assumed(0.8, {"alpha": 0.1}, ["alpha", "beta", "gamma"])
    calls = judge_model.calls(reference, pair, judge, [("alpha", "beta"), ("beta", "gamma")], rng)
    assert abs((calls[pair == 1] == reference[pair == 1]).mean() - 0.8) < 0.015
    assert abs(calls[pair == 0].mean() - reference[pair == 0].mean() - 0.1) < 0.015  # alpha's lean
    coin = judge_model.calls(reference, pair, judge_model.assumed(0.5, {}, SYSTEMS), [("alpha", "beta")] * 2, rng)
    assert abs(np.corrcoef(coin, reference)[0, 1]) < 0.03


def test_bad_options_are_refused_with_what_to_do(tmp_path):
    study = str(_study_file(tmp_path))

    def refused(*args):
        run = CliRunner().invoke(main, ["plan", study, "--replicates", "1", *args])
        assert run.exit_code != 0
        return run.output

    assert "outside [0.5, 1]" in refused("--judge-agreement", "0.3")
    assert "delta, not a system of this study" in refused("--judge-bias", "delta=0.1")
    assert "give SYSTEM=B" in refused("--judge-bias", "alpha")
    assert "every share must be in (0, 1]" in refused("--shares", "0,0.5")
    assert "numbers separated by commas" in refused("--shares", "0.1,half")
    assert "at least 2 for an interval" in refused("--shares", "0.01")
    assert "(0, 0.5)" in refused("--width", "0.7")
    assert "not a folder" in refused("--pilot", str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    assert "no votes.csv" in refused("--pilot", str(tmp_path / "empty"))
    assert "not both" in refused("--pilot", str(tmp_path / "empty"), "--judge-agreement", "0.8")
    assert "give --shares" in refused("--sizes", "1,2")
    (tmp_path / "plain").mkdir()
    plain = pairwise_study(tmp_path / "plain", f"sqlite:///{tmp_path / 'y.db'}")
    run = CliRunner().invoke(main, ["plan", str(plain), "--judge-agreement", "0.8"])
    assert run.exit_code != 0 and "--judge-agreement: for a study with an LLM judge" in run.output


def test_confirm_runs_the_recommended_share_and_its_export_is_a_pilot(tmp_path, judge_server):  # noqa: F811
    study = judged_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}", judge_server.url)
    run = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "2", "--shares", "0.3,1", "--width", "0.3", "--confirm", "--json"]
    )
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    confirmed = out["confirm"]
    assert confirmed["share"] == out["recommended"] == 0.3
    assert confirmed["assignments"] == 3 * confirmed["hits"]  # 3 votes on each of the 27 items
    assert set(confirmed["outcome"]) == set(judge_plan.DECISIONS)
    export = tmp_path / "runs" / "ab-demo" / "plan" / "confirm" / "ab-demo" / "export"
    assert (export / "judge.csv").is_file() and (export / "votes.csv").is_file()
    # The confirming run's export is a pilot: the scripted judge favours gamma, far more than people do.
    measured = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "2", "--shares", "0.3,1", "--pilot", str(export)]
    )
    assert measured.exit_code == 0, measured.output
    assert f"measured on the pilot {export}" in measured.output and "ASSUMED" not in measured.output
    judge = judge_model.from_pilot(export, SYSTEMS)
    assert 0.5 <= judge.agreement <= 1 and judge.measured_on > 0
    assert judge.lean[("beta", "gamma")] < -0.1  # gamma wins more often by the judge than by people


def test_the_plan_sizes_the_uncertainty_rule_at_the_uniform_rules_cost(big):
    uniform = _plan(big, 0.9, replicates=3, shares=[0.3, 0.6]).table
    judge = big.judge.model_copy(update={"select": "uncertainty", "pilot": 0.4})
    active = _plan(big.model_copy(update={"judge": judge}), 0.9, replicates=3, shares=[0.3, 0.6]).table
    # The expected number of human items (and so the cost) is the budget under either rule.
    assert list(active["human_items"]) == list(uniform["human_items"]) and list(active["cost"]) == list(uniform["cost"])
    # Each share analysed as drawn: a pilot, a weighted second wave; n_human near the budget's 45 and 90 per pair.
    assert active["n_human"].between(0.8 * uniform["n_human"], 1.2 * uniform["n_human"]).all()
    assert active["half_width_ppi"].notna().all() and (active["half_width_ppi"] < 1.2 * uniform["half_width_ppi"]).all()
