"""Prompt hygiene, categories, costs, inverse-sampling weights and declared style covariates of the
arena's analysis step (issue 41), on battles and conversations written as an export folder writes them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from hitkit.errors import ConfigError, InputError
from hitkit.protocols.arena import hygiene
from hitkit.protocols.arena.analysis import analyze, analyze_battles
from hitkit.protocols.arena.categories import by_rules, categorise
from hitkit.protocols.arena.columns import BATTLE_COLUMNS
from hitkit.protocols.arena.costs import cost_table, pareto
from hitkit.protocols.arena.covariates import add_covariates
from hitkit.protocols.arena.leaderboard import inverse_sampling_weights, leaderboard
from hitkit.protocols.arena.options import CategoriesConfig, Covariate, SystemCost
from hitkit.study.loading import load_study
from tests.test_arena_study import arena_study

RULES = {"code": [r"\bpython\b", r"\bfunction\b"], "writing": [r"\bpoem\b", r"\bhaiku\b"]}


def test_prompts_that_differ_only_in_case_spacing_or_punctuation_normalise_alike():
    assert hygiene.normalise("  What IS  the capital of France?! ") == hygiene.normalise(
        "what is the capital of france"
    )


def test_near_duplicate_prompts_group_as_one_and_different_prompts_do_not():
    texts = [
        "Please write a short poem about the sea at night under the stars",
        "please write a short poem about the sea at night under the bright stars",
        "How do I reverse a list in Python without using reversed?",
        "",
    ]
    groups = hygiene.prompt_groups(texts, similarity=0.6)
    assert groups[0] == groups[1]
    assert groups[2] not in (groups[0], -1)
    assert groups[3] == -1
    # At a threshold above their similarity the two poems stay apart: no pair below it is ever merged.
    apart = hygiene.prompt_groups(texts, similarity=0.95)
    assert apart[0] != apart[1]


def test_the_cap_leaves_out_a_prompts_battles_after_the_first_cap_but_never_the_study_prompt_sets():
    groups = [0, 0, 0, 1, 0, 0, -1]
    exempt = [False, False, False, False, False, True, False]
    assert hygiene.capped(groups, exempt, cap=2).tolist() == [False, False, True, False, True, False, False]


def test_rule_categories_take_the_first_matching_category_and_other_otherwise():
    got = by_rules(["Write a Python function", "A haiku about a function", "Hello there"], RULES, "other")
    assert got == ["code", "code", "other"]


def test_a_rule_that_is_not_a_regular_expression_is_named_in_the_error():
    with pytest.raises(ConfigError, match=r"rules.code: '\(python'"):
        by_rules(["x"], {"code": ["(python"]}, "other")


def test_a_categories_section_without_its_categories_is_refused():
    with pytest.raises(ValueError, match="give categories.descriptions"):
        CategoriesConfig(method="embedding", rules=RULES)


@pytest.mark.model
def test_the_embedding_model_puts_prompts_in_the_category_of_the_nearest_description():
    config = CategoriesConfig(
        method="embedding",
        descriptions={
            "code": "programming, software code, debugging a Python or JavaScript program",
            "writing": "creative writing: poems, stories, song lyrics",
            "math": "mathematics: equations, arithmetic, proofs",
        },
    )
    texts = ["Fix the bug in my JavaScript loop", "Write a sonnet about autumn leaves", "Solve 3x + 5 = 20 for x"]
    assert categorise(texts, config) == ["code", "writing", "math"]


def battle_rows(pairs: dict[tuple[str, str], tuple[int, int]], start: int = 0) -> list[dict]:
    """Battles of each pair: (left wins, right wins), sides as given, one worker per 10 battles."""
    rows, i = [], start
    for (a, b), (wins_a, wins_b) in pairs.items():
        for vote in ["a"] * wins_a + ["b"] * wins_b:
            rows.append(row(i, a, b, vote))
            i += 1
    return rows


def row(i: int, a: str, b: str, vote: str, **extra) -> dict:
    base = {c: "" for c in BATTLE_COLUMNS}
    base.update(
        study="s",
        worker_id=f"w{i % 40}",
        battle_id=f"a{i}:u{i}",
        assignment_id=str(i),
        hit_id=str(i),
        turns=1,
        system_a=a,
        system_b=b,
        vote=vote,
        is_control=0,
        leak=0,
        **{c: 10 for c in BATTLE_COLUMNS if c.startswith(("tokens_", "header_", "list_", "bold_"))},
    )
    base.update(extra)
    return base


def test_with_inverse_sampling_weights_a_deliberately_over_sampled_pair_no_longer_dominates():
    # A cycle: anna beats bert, bert beats cleo, cleo beats anna, each 80 %; anna–bert sampled 20 times as often.
    frame = pd.DataFrame(
        battle_rows({("anna", "bert"): (1600, 400), ("bert", "cleo"): (80, 20), ("cleo", "anna"): (80, 20)})
    )
    plain, _, _ = leaderboard(frame, n_boot=0, anchor=None)
    weighted, _, _ = leaderboard(frame, n_boot=0, anchor=None, inverse_sampling=True)
    unweighted, even = (t.set_index("system")["rating"] for t in (plain, weighted))
    assert unweighted["anna"] - unweighted["bert"] > 150  # the over-sampled pair decides the plain fit
    assert even.max() - even.min() < 5  # weighted, the cycle is a three-way draw
    weights = inverse_sampling_weights(np.array([0, 1, 1, 0]), np.array([1, 0, 2, 2]))
    assert weights.tolist() == pytest.approx([2 / 3, 2 / 3, 4 / 3, 4 / 3])


def test_declared_covariates_count_reply_features_and_enter_style_control():
    rows = [row(i, "anna", "bert", "a" if i % 3 else "b") for i in range(60)]
    replies = {
        ("s", r["battle_id"], side): [f"see https://x.org/{i} and ```code```" * (i % 3)]
        for i, r in enumerate(rows)
        for side in "ab"
    }
    frame = add_covariates(
        pd.DataFrame(rows),
        replies,
        [Covariate(name="links", feature="links"), Covariate(name="shouting", pattern=r"\b[A-Z]{3,}\b")],
    )
    assert frame["style_links_a"].tolist()[:3] == [0.0, 1.0, 2.0]
    result = analyze_battles(frame, n_boot=0, covariates=["links", "shouting"])
    assert list(result.tables["style"]["feature"]) == ["length", "headers", "lists", "bold", "links", "shouting"]
    assert result.summary["style_covariates"] == ["links", "shouting"]


def test_a_column_covariate_the_battles_lack_is_an_error_naming_the_column():
    with pytest.raises(InputError, match="emoji_a"):
        add_covariates(pd.DataFrame([row(0, "anna", "bert", "a")]), {}, [Covariate(name="e", column="emoji")])


def test_the_pareto_front_holds_the_systems_no_other_beats_at_no_greater_cost():
    rating = np.array([1100.0, 1050.0, 1000.0, 1080.0])
    cost = np.array([2.0, 1.0, 0.5, 3.0])
    assert pareto(rating, cost) == [True, True, True, False]


def test_costs_take_median_latency_tokens_price_and_energy_per_system():
    turns = pd.DataFrame(
        {
            "study": "s",
            "battle_id": ["b1", "b1", "b2", "b2"],
            "side": ["a", "b", "a", "b"],
            "system": ["anna", "bert", "anna", "bert"],
            "first_token_ms": [100, 300, 200, None],
            "reply_ms": [1000, 3000, 3000, 4000],
            "input_tokens": [10, 10, 30, 30],
            "output_tokens": [100, 200, 300, 400],
        }
    )
    board = pd.DataFrame({"system": ["anna", "bert"], "rating": [1010.0, 990.0], "rating_style": [None, None]})
    costs = {"anna": SystemCost(input_per_million=1.0, output_per_million=2.0, watts=360.0)}
    table, basis = cost_table(turns, costs, board)
    anna, bert = table.set_index("system").loc["anna"], table.set_index("system").loc["bert"]
    assert (anna["first_token_ms"], anna["reply_ms"], bert["first_token_ms"]) == (150.0, 2000.0, 300.0)
    assert (anna["input_tokens"], anna["output_tokens"]) == (40, 400)
    assert anna["price_total"] == pytest.approx((40 * 1.0 + 400 * 2.0) / 1e6)
    assert anna["energy_wh_total"] == pytest.approx(360 * 4000 / 3_600_000)
    assert basis == "price_per_reply" and bool(anna["pareto"]) and not bool(bert["pareto"])


def write_export(folder, rows: list[dict], prompts: dict[str, str]) -> None:
    """battles.csv and conversations.jsonl as ``hitkit export`` writes them."""
    folder.mkdir()
    pd.DataFrame(rows, columns=list(BATTLE_COLUMNS)).to_csv(folder / "battles.csv", index=False)
    with (folder / "conversations.jsonl").open("w") as fh:
        for r in rows:
            for side in "ab":
                system = r[f"system_{side}"]
                turns = [
                    {"index": 0, "speaker": "worker", "system": None, "text": prompts[r["battle_id"]]},
                    {
                        "index": 1,
                        "speaker": "bot",
                        "system": system,
                        "text": "Sure. " * 20,
                        "reply_ms": 800,
                        "first_token_ms": 90,
                    },
                ]
                key = f"arena:{r['battle_id']}:{side}"
                fh.write(
                    json.dumps(
                        {"study": "s", "conversation_id": key, "meta": {"side": side, "system": system}, "turns": turns}
                    )
                    + "\n"
                )


def test_analysis_caps_a_repeated_prompt_categorises_written_prompts_and_prices_systems(tmp_path):
    pairs = {("anna", "bert"): (30, 10), ("bert", "cleo"): (30, 10), ("cleo", "anna"): (10, 30)}
    rows = battle_rows(pairs)
    prompts = {r["battle_id"]: f"Write a Python function number {i} that sorts items" for i, r in enumerate(rows)}
    for r in rows[:50]:  # one greeting, pasted 50 times with small variations: a cap of 20 keeps 20
        prompts[r["battle_id"]] = (
            "Hello!!  how are you today my friend"
            if int(r["assignment_id"]) % 2
            else "hello, how are you today my friend?"
        )
    write_export(tmp_path / "export", rows, prompts)
    path = arena_study(tmp_path, "sqlite:///unused.db", "http://127.0.0.1:9/v1")
    data = yaml.safe_load(path.read_text())
    data["arena"].update(
        prompt_cap=20,
        categories={"method": "rules", "rules": RULES, "other_name": "chat"},
        costs={"anna": {"input_per_million": 3, "output_per_million": 15}, "bert": {"output_per_million": 1}},
    )
    path.write_text(yaml.safe_dump(data))
    result = analyze(tmp_path / "export", seed=0, config=load_study(path), options={"n_boot": 20})
    s = result.summary
    assert s["prompts"]["capped_battles"] == 30 and s["leaderboard_battles"] == 90
    assert any("arena.prompt_cap = 20" in w for w in s["warnings"])
    assert set(result.tables["leaderboard"]["category"]) == {"all"}
    categories = result.tables["categories"]
    assert set(categories["category"]) == {"code", "chat"}
    assert categories.groupby("category")["battles"].sum().to_dict() == {"chat": 40, "code": 140}  # 2 per battle
    costs = result.tables["costs"].set_index("system")
    assert costs.loc["anna", "price_per_reply"] > costs.loc["bert", "price_per_reply"] > 0
    assert pd.isna(costs.loc["cleo", "price_per_reply"]) and costs.loc["cleo", "reply_ms"] == 800
    assert "costs" in result.figures and s["cost_basis"] == "price_per_reply"
    result.write(tmp_path / "out")
    assert (tmp_path / "out" / "costs.csv").is_file() and (tmp_path / "out" / "costs.png").stat().st_size > 1000


def test_hitkit_analyze_arena_inverse_sampling_weighs_the_fit_and_says_so_in_the_summary(tmp_path):
    from click.testing import CliRunner

    from hitkit.cli import main

    rows = battle_rows({("anna", "bert"): (160, 40), ("bert", "cleo"): (16, 4), ("cleo", "anna"): (16, 4)})
    write_export(tmp_path / "export", rows, {r["battle_id"]: f"question {i} about tides" for i, r in enumerate(rows)})
    runs = {}
    for name, flags in (("plain", []), ("weighted", ["--inverse-sampling"])):
        out = tmp_path / name
        args = ["analyze", "arena", str(tmp_path / "export"), "--out", str(out), "--n-boot", "20", "--no-progress"]
        result = CliRunner().invoke(main, args + flags)
        assert result.exit_code == 0, result.output
        runs[name] = (json.loads((out / "summary.json").read_text()), pd.read_csv(out / "leaderboard.csv"))
    assert runs["plain"][0]["inverse_sampling"] is False and runs["weighted"][0]["inverse_sampling"] is True
    spread = {n: float(board["rating"].max() - board["rating"].min()) for n, (_, board) in runs.items()}
    assert spread["weighted"] < spread["plain"] / 3
    assert (tmp_path / "weighted" / "costs.csv").is_file()
