"""`hitkit plan` for Spot The Bot and live-chat studies with an LLM judge: the crowd's share, sized by simulated
studies analysed with the real PPI++ code (hitkit/simulation/judge_planning.py, hitkit/protocols/*/judge_plan.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.protocols.live_chat import judge_plan as live_chat
from hitkit.protocols.spot_the_bot import judge_plan as spot_the_bot
from hitkit.simulation.judge_planning import FORMULA
from hitkit.study.loading import load_study
from tests.test_judge_live_chat import endpoint, judged_chat_study  # noqa: F401  (endpoint: a fixture)
from tests.test_judge_spot_the_bot import judge_server, judged_stb_study  # noqa: F401  (judge_server: a fixture)

REPO = Path(__file__).resolve().parents[1]
STB = {"alpha": 0.62, "beta": 0.5, "gamma": 0.38}


def _stb_file(tmp_path, per_pair=24):
    """A Spot The Bot study with a judge (never called) whose bots lead nowhere: a plan asks neither."""
    data = {
        "study": "stb-plan",
        "task": "spot_the_bot",
        "seed": 5,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": "http://127.0.0.1:9/v1", "model": n} for n in STB],
        "generation": {"conversations_per_pair": per_pair},
        "spot_the_bot": {"segment_lengths": [2, 3]},
        "hit": {"title": "Is it a person or a bot?", "reward": "1.00"},
        "simulated": {"quality": STB},
        "judge": {"url": "http://127.0.0.1:9", "model": "j", "human_share": 0.5},
    }
    path = tmp_path / "stb.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _live_chat_file(tmp_path, hits=40):
    """The example live-chat study with a judge (never called) and ``hits`` HITs."""
    data = yaml.safe_load((REPO / "examples" / "live_chat.yaml").read_text())
    data["judge"] = {"url": "http://127.0.0.1:9", "model": "j", "human_share": 0.5}
    data["live_chat"]["hits"] = hits
    data["out"] = str(tmp_path / "runs")
    for system in data["systems"]:
        for key in ("responses", "script"):
            if key in system and not Path(system[key]).is_absolute():
                system[key] = str(REPO / "examples" / system[key])
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _planned(study, study_name, *args):
    """The plan's printed output and its plan.csv."""
    run = CliRunner().invoke(main, ["plan", str(study), *args])
    assert run.exit_code == 0, run.output
    return run.output, pd.read_csv(Path(study).parent / "runs" / study_name / "plan" / "plan.csv")


def _refused(study, *args):
    run = CliRunner().invoke(main, ["plan", str(study), "--replicates", "1", *args])
    assert run.exit_code != 0, run.output
    return run.output


def test_a_spot_the_bot_share_plan_prints_its_grid_the_estimator_and_the_assumption(tmp_path):
    study = _stb_file(tmp_path, per_pair=12)
    out, table = _planned(study, "stb-plan", "--replicates", "2", "--shares", "0.3,1")
    assert "Spot The Bot with an LLM judge" in out and "ASSUMED agreement 0.70" in out and FORMULA in out
    assert "ppi_ratio" in out and "- people only, from the same annotations:" in out
    assert list(table["human_share"]) == [0.3, 1.0]
    assert (table["human_annotations"] == 2 * table["human_segments"]).all()  # 2 annotations a segment
    assert table["hits"].iloc[0] < table["hits"].iloc[1]  # the crowd's share is what is packed and paid
    # Every segment annotated: nothing left for the judge, PPI is the people-only estimate.
    assert table["half_width_ppi"].iloc[-1] == table["half_width_human"].iloc[-1]
    for column in ("closest_pair", "closest_pair_human", "every_pair", "best"):
        assert column in table, column
    as_json = json.loads(
        CliRunner()
        .invoke(
            main,
            [
                "plan",
                str(study),
                "--replicates",
                "1",
                "--shares",
                "0.5,1",
                "--judge-agreement",
                "0.9",
                "--judge-bias",
                "alpha=0.1",
                "--json",
            ],
        )
        .output
    )
    assert as_json["judge"] == {"agreement": 0.9, "source": "assumed", "bias": {"alpha": 0.1}}


@pytest.fixture(scope="module")
def stb(tmp_path_factory):
    return load_study(_stb_file(tmp_path_factory.mktemp("stb")))


def test_a_better_spot_the_bot_judge_needs_a_smaller_share_and_a_die_the_people_only_share(stb):
    shares = [0.2, 0.3, 0.4, 0.5, 0.75, 1.0]
    plans = {
        p: spot_the_bot.plan(stb, spot_the_bot.assumed(p, {}, list(STB)), replicates=8, shares=shares, width=0.2)
        for p in (1 / 3, 0.7, 0.95)
    }
    people = plans[1 / 3].people_only
    # Conversations are drawn and resampled whole (their segments are dependent): 0.75 measured (0.4–0.5 when
    # segments were treated as independent items).
    assert people is not None and people in (0.5, 0.75)
    assert {p.people_only for p in plans.values()} == {people}  # the same simulated annotations for every judge
    assert abs(shares.index(plans[1 / 3].recommended) - shares.index(people)) <= 1
    assert plans[0.95].recommended <= plans[0.7].recommended <= plans[1 / 3].recommended
    assert plans[0.95].recommended < people
    good = plans[0.95].table.set_index("human_share")
    assert good.loc[0.5, "n_effective"] > 1.1 * good.loc[0.5, "n_human"]
    assert (good["rho"] > 0.6).all()


def test_the_simulated_spot_the_bot_judge_agrees_and_leans_as_told_and_a_pilot_measures_it(stb, tmp_path):
    from hitkit.protocols.spot_the_bot.judge import JUDGE_COLUMNS
    from hitkit.protocols.spot_the_bot.judge_analysis import judge_bias
    from hitkit.protocols.spot_the_bot.plan import simulate_annotations

    base = spot_the_bot._base(stb)
    annotations = simulate_annotations(base.model_copy(update={"judge": None}), 11)
    judge = spot_the_bot.assumed(0.8, {"gamma": 0.2}, list(STB))
    labels = spot_the_bot.judge_labels(annotations, judge, np.random.default_rng(0))
    bias = judge_bias(annotations, labels).set_index("system")["bias"]
    assert abs(bias["gamma"] - 0.2) < 0.01
    plain = spot_the_bot.judge_labels(annotations, spot_the_bot.assumed(0.8, {}, list(STB)), np.random.default_rng(0))
    modal = spot_the_bot._modal(annotations).to_numpy()
    assert abs((plain["label"].to_numpy() == modal).mean() - 0.8) < 0.045  # 3 sd of 672 speakers
    export = tmp_path / "export"
    export.mkdir()
    annotations.to_csv(export / "annotations.csv", index=False)
    labels.assign(parsed=True, human_subset=True, model="m", reply="")[list(JUDGE_COLUMNS)].to_csv(
        export / "judge.csv", index=False
    )
    measured = spot_the_bot.from_pilot(export, list(STB))
    # Off gamma's speakers the judge agrees as told; the bias moves some of gamma's labels away from the crowd's.
    assert 0.7 < measured.value < 0.85 and measured.measured_on == 2 * len(labels) / 2
    assert abs(measured.bias["gamma"] - bias["gamma"]) < 1e-12 and "human" not in measured.bias


def test_a_live_chat_share_plan_says_what_the_share_buys_and_keeps_the_hits(tmp_path):
    study = _live_chat_file(tmp_path)
    out, table = _planned(study, "live-chat-demo", "--replicates", "2", "--shares", "0.5,1")
    assert "live chat with an LLM judge" in out and "ASSUMED correlation 0.50" in out and FORMULA in out
    assert "NOT fewer HITs or a lower cost" in out and "ppi_mean" in out
    assert list(table["human_share"]) == [0.5, 1.0]
    assert table["hits"].nunique() == 1 and table["cost"].nunique() == 1  # the chats are the work
    assert table["rated_conversations"].iloc[0] < table["rated_conversations"].iloc[1] == 240  # 200 real + 40 QC
    assert (table["ratings"] == 7 * table["rated_conversations"]).all()
    assert table["half_width_ppi"].iloc[-1] == table["half_width_human"].iloc[-1]
    assert "spammers_fail_qc" in table and "clusters" in table


def test_a_better_live_chat_judge_needs_no_larger_share_and_a_useless_one_the_people_only_share(tmp_path):
    config = load_study(_live_chat_file(tmp_path))
    shares = [0.5, 0.75, 1.0]
    systems = [s.name for s in config.systems]
    plans = {
        r: live_chat.plan(config, live_chat.assumed(r, {}, systems), replicates=3, shares=shares, width=0.12)
        for r in (0.0, 0.95)
    }
    people = plans[0.0].people_only
    assert people == plans[0.95].people_only == 0.75
    assert abs(shares.index(plans[0.0].recommended) - shares.index(people)) <= 1
    assert plans[0.95].recommended <= plans[0.0].recommended
    good, useless = (plans[r].table.set_index("human_share") for r in (0.95, 0.0))
    assert good.loc[0.75, "rho"] > 0.3 and abs(useless.loc[0.75, "rho"]) < 0.2
    # The sizing formula tracks the simulated interval.
    ratio = good["half_width_ppi"] / good["half_width_formula"]
    assert ((ratio > 0.9) & (ratio < 1.15)).all(), good


def test_a_live_chat_pilot_measures_the_simulated_judge(tmp_path):
    from hitkit.protocols.live_chat.judge import JUDGE_COLUMNS
    from hitkit.protocols.live_chat.plan import simulate_tables

    config = load_study(_live_chat_file(tmp_path))
    criteria = config.live_chat.criterion_list()
    assignments, ratings, _ = simulate_tables(config.model_copy(update={"judge": None}), 3)
    judge = live_chat.assumed(0.8, {"friendly": 0.5}, [s.name for s in config.systems])
    scores = live_chat.judge_scores(ratings, criteria, judge, np.random.default_rng(0))
    export = tmp_path / "export"
    export.mkdir()
    assignments.to_csv(export / "assignments.csv", index=False)
    ratings.to_csv(export / "ratings.csv", index=False)
    ids = ratings.drop_duplicates("conversation_id").set_index("conversation_id")[["study", "hit_id", "assignment_id"]]
    scores.join(ids, on="conversation_id").assign(human_subset=True, model="m", reply="")[list(JUDGE_COLUMNS)].to_csv(
        export / "judge.csv", index=False
    )
    measured = live_chat.from_pilot(export, config)
    assert measured.source == f"measured on the pilot {export}" and measured.measured_on > 1000
    assert 0.65 < measured.value < 0.85, measured
    others = [b for s, b in measured.bias.items() if s != "friendly"]
    assert measured.bias["friendly"] > max(others) + 0.25 and "qc" not in measured.bias, measured


def test_bad_options_of_the_other_protocols_are_refused_with_what_to_do(tmp_path):
    stb_study, live = _stb_file(tmp_path, per_pair=6), _live_chat_file(tmp_path)
    assert "outside [1/3, 1]" in _refused(stb_study, "--judge-agreement", "0.2")
    assert "--judge-correlation is not for spot_the_bot studies" in _refused(stb_study, "--judge-correlation", "0.5")
    assert "delta, not a system of this study" in _refused(stb_study, "--judge-bias", "delta=0.1")
    assert "lies in [-1, 1]" in _refused(stb_study, "--judge-bias", "alpha=2")
    assert "every share must be in (0, 1]" in _refused(stb_study, "--shares", "0,0.5")
    assert "at least 2 for an interval" in _refused(stb_study, "--shares", "0.01")
    (tmp_path / "empty").mkdir()
    assert "no annotations.csv" in _refused(stb_study, "--pilot", str(tmp_path / "empty"))
    assert "--judge-agreement is not for live_chat studies" in _refused(live, "--judge-agreement", "0.8")
    assert "outside [0, 1]" in _refused(live, "--judge-correlation", "1.5")
    assert "no ratings.csv" in _refused(live, "--pilot", str(tmp_path / "empty"))
    assert "at least 2 rated for an interval" in _refused(live, "--shares", "0.02")
    assert "(0, ∞)" in _refused(live, "--width", "-1")


def _confirmed(study, study_name, *args) -> tuple[dict, Path]:
    """``hitkit plan STUDY --confirm --json``'s output and the confirming run's folder."""
    run = CliRunner().invoke(main, ["plan", str(study), "--replicates", "1", *args, "--confirm", "--json"])
    assert run.exit_code == 0, run.output
    folder = Path(study).parent / "runs" / study_name / "plan" / "confirm" / study_name
    out = json.loads(run.output)
    assert out["confirm"]["folder"] == str(folder) and out["confirm"]["database"] == f"sqlite:///{folder / 'hitkit.db'}"
    assert out["confirm"]["provider"] == "simulated"
    return out, folder


def test_a_spot_the_bot_confirming_run_annotates_the_recommended_share_and_scores_its_ppi_win_rates(
    tmp_path,
    judge_server,  # noqa: F811 - the fixture imported above
):
    from sqlalchemy import select

    from hitkit.db.models import JudgeLabel, Unit
    from hitkit.db.session import session_scope
    from tests.test_judge_spot_the_bot import PER_PAIR, SEGMENTS

    # Four conversations a pair: at 0.5 each pair's crowd annotates two (the least an interval takes).
    study = judged_stb_study(tmp_path, f"sqlite:///{tmp_path / 'own.db'}", judge_server.url, human_share=0.5)
    out, folder = _confirmed(study, "stb-demo", "--shares", "0.5,1", "--width", "0.499")
    confirmed = out["confirm"]
    assert confirmed["share"] == out["recommended"] == 0.5
    assert confirmed["assignments"] == 2 * confirmed["hits"]  # two annotations a segment
    assert set(confirmed["outcome"]) == set(out["decisions"]) == set(spot_the_bot.DECISIONS)
    assert len(judge_server.prompts) == SEGMENTS  # the study file's judge labelled every segment before posting
    with session_scope(confirmed["database"]) as s:
        assert s.scalar(select(JudgeLabel.id).where(JudgeLabel.status != "done").limit(1)) is None
        assert len(s.scalars(select(JudgeLabel)).all()) == SEGMENTS
        conversations = {u.conversation_id for u in s.scalars(select(Unit))}
    judge = pd.read_csv(folder / "export" / "judge.csv", dtype={"conversation_id": str})
    drawn = judge.loc[judge["human_subset"]].groupby("system")["conversation_id"].nunique()
    annotated = pd.read_csv(folder / "export" / "annotations.csv", dtype={"conversation_id": str})
    assert set(annotated["conversation_id"]) == set(judge.loc[judge["human_subset"], "conversation_id"])
    assert len(conversations) == judge.loc[judge["human_subset"], "conversation_id"].nunique()
    # Half of each pair's conversations, two of four (each system in three pairs, its self-chat one included),
    # and three of the five human–human ones (2.5 rounded half up).
    assert drawn.to_dict() == {
        "alpha": 3 * PER_PAIR // 2,
        "beta": 3 * PER_PAIR // 2,
        "gamma": 3 * PER_PAIR // 2,
        "human": 3,
    }
    assert confirmed["outcome"] == spot_the_bot.decide_export(load_study(study), folder / "export")


def test_a_live_chat_confirming_run_rates_the_recommended_share_judges_every_conversation_and_scores_it(
    tmp_path,
    endpoint,  # noqa: F811 - the fixture imported above
):
    from sqlalchemy import select

    from hitkit.db.models import JudgeLabel, Unit
    from hitkit.db.session import session_scope
    from tests.test_judge_live_chat import NAMES

    hits = 6  # smaller than the judged study's 10; the plan still recommends half
    study = judged_chat_study(tmp_path, f"sqlite:///{tmp_path / 'own.db'}", endpoint.url, hits=hits)
    # A judge that fails after the crowd's chats: the confirming run says so instead of scoring without it.
    endpoint.fail_after = 0
    failed = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "1", "--shares", "0.5,1", "--width", "5", "--confirm", "--json"]
    )
    assert failed.exit_code != 0 and "did not label all of the crowd's work" in failed.output, failed.output
    endpoint.fail_after = None
    out, folder = _confirmed(study, "chat-judge", "--shares", "0.5,1", "--width", "5")
    confirmed = out["confirm"]
    assert confirmed["share"] == out["recommended"] == 0.5
    assert confirmed["hits"] == confirmed["assignments"] == hits
    assert set(confirmed["outcome"]) == set(out["decisions"]) == set(live_chat.DECISIONS)
    real = hits * 5
    assert len(endpoint.judged) == real  # the judge rated every real-system conversation, after the crowd
    with session_scope(confirmed["database"]) as s:
        labels = s.scalars(select(JudgeLabel)).all()
        assert len(labels) == real * len(NAMES) and {r.status for r in labels} == {"done"}
        drawn = {u.key for u in s.scalars(select(Unit)) if u.payload.get("rated") is True}
    assert 0 < len(drawn) < real
    judge = pd.read_csv(folder / "export" / "judge.csv", dtype={"conversation_id": str})
    ratings = pd.read_csv(folder / "export" / "ratings.csv", dtype={"conversation_id": str, "is_control": str})
    sampled = set(judge.loc[judge["human_subset"], "conversation_id"])
    assert sampled == set(ratings.loc[ratings["is_control"] == "0", "conversation_id"]) and len(sampled) == len(drawn)
    assert confirmed["outcome"]["spammers_fail_qc"] is None  # an all-diligent crowd
    assert confirmed["outcome"] == live_chat.decide_export(load_study(study), folder / "export")


def test_a_spot_the_bot_plan_sizes_the_uncertainty_rule_at_the_uniform_rules_cost(stb):
    judge = spot_the_bot.assumed(0.9, {}, list(STB))
    shares = [0.5, 0.75]
    uniform = spot_the_bot.plan(stb, judge, replicates=2, shares=shares).table
    section = stb.judge.model_copy(update={"select": "uncertainty", "pilot": 0.5})
    active = spot_the_bot.plan(stb.model_copy(update={"judge": section}), judge, replicates=2, shares=shares).table
    # The expected number of human conversations (and so the cost) is the budget under either rule.
    for column in ("human_segments", "hits", "cost"):
        assert list(active[column]) == list(uniform[column]), column
    # Each share analysed as drawn: a uniform pilot of conversations, then a second wave weighted by conversation.
    assert active["n_human"].between(0.7 * uniform["n_human"], 1.3 * uniform["n_human"]).all(), active
    assert active["half_width_ppi"].notna().all() and (active["half_width_ppi"] < 1.3 * uniform["half_width_ppi"]).all()
