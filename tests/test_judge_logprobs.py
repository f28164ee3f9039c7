"""``judge.confidence``: the judge's confidence in each label read from its server's token log-probabilities,
stored in the label's meta, and the crowd's second wave drawn from it where present."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.db.migrate import upgrade
from hitkit.db.models import JudgeLabel, Study
from hitkit.db.session import session_scope
from hitkit.judges.confidence import label_confidence, label_probabilities, names
from hitkit.protocols.base import UnitSpec
from hitkit.protocols.pairwise.judge import LABELS, export, selection
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret


def entry(token: str, logprob: float, top: dict[str, float]) -> dict:
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}


def test_a_token_names_the_label_it_begins():
    assert names(" A", "a") and names("[[B", "b") and names("ti", "tie") and names("**Tie", "tie")
    assert not names("Based", "b") and not names("", "a") and not names("[[", "a") and not names("the", "tie")


def test_label_probabilities_are_the_labels_first_token_mass_normalised():
    entries = [
        entry("[[", -0.01, {"[[": -0.01, "The": -5.0}),
        entry("A", math.log(0.6), {"A": math.log(0.6), " a": math.log(0.1), "B": math.log(0.2), "t": math.log(0.05)}),
        entry("]]", -0.001, {}),
    ]
    probs = label_probabilities(entries, "a", LABELS)
    assert probs == pytest.approx({"a": 0.7 / 0.95, "b": 0.2 / 0.95, "tie": 0.05 / 0.95})
    stored = label_confidence(entries, "a", LABELS)
    assert stored["confidence"] == pytest.approx(0.7 / 0.95, abs=1e-6) and set(stored["label_probs"]) == set(LABELS)
    # The step is where the parsed label begins: a reply read as b looks for a token naming b.
    assert label_probabilities(entries, "b", LABELS) is None
    assert label_confidence(None, "a", LABELS) == {} and label_confidence(entries, None, LABELS) == {}
    assert label_confidence(entries, "a", None) == {}
    # No alternatives asked for: the chosen token alone, confidence 1.
    assert label_probabilities([entry("B", -2.0, {})], "b", LABELS) == {"a": 0.0, "b": 1.0, "tie": 0.0}


def unit(i: int) -> UnitSpec:
    return UnitSpec(
        key=f"{i}:x~y",
        payload={"item_id": str(i), "systems": ["x", "y"], "prompt": "p", "responses": ["r", "s"]},
        required_answers=1,
    )


def label(i: int, order: str, vote: str, probs: dict[str, float] | None) -> dict:
    a, b = ("x", "y") if order == "ab" else ("y", "x")
    meta = {"item_id": str(i), "system_a": a, "system_b": b}
    if probs is not None:
        meta |= {"confidence": probs[vote], "label_probs": probs}
    return {"meta": meta, "label": vote, "parsed": True, "human_subset": False, "model": "j", "reply": vote}


def test_the_second_wave_reads_stored_logprob_confidence_and_agreement_where_none():
    units = [unit(i) for i in range(4)]
    labels = [
        # 0: both orders say x, each sure: confident either way.
        label(0, "ab", "a", {"a": 0.98, "b": 0.01, "tie": 0.01}),
        label(0, "ba", "b", {"a": 0.01, "b": 0.98, "tie": 0.01}),
        # 1: both orders say x, but barely: agreement would call it certain, the logprobs do not.
        label(1, "ab", "a", {"a": 0.55, "b": 0.45, "tie": 0.0}),
        label(1, "ba", "b", {"a": 0.45, "b": 0.55, "tie": 0.0}),
        # 2: no logprobs (an auto label, a reply without them): the hard votes, as agreement has it.
        label(2, "ab", "a", None),
        label(2, "ba", "b", None),
        # 3: the orders disagree, each surely.
        label(3, "ab", "a", {"a": 0.9, "b": 0.1, "tie": 0.0}),
        label(3, "ba", "a", {"a": 0.9, "b": 0.1, "tie": 0.0}),
    ]
    judge = export("s", labels)
    assert {"confidence", "soft_vote"} <= set(judge.columns) and judge["soft_vote"].isna().sum() == 2
    votes = pd.DataFrame(columns=["item_id", "system_a", "system_b", "outcome"])
    scores = selection(units, {"votes": votes}, judge)
    confidence = scores["confidence"].to_dict()
    assert confidence["0:x~y"] == pytest.approx(abs(2 * (0.985 + 0.985) / 2 - 1))
    assert confidence["1:x~y"] == pytest.approx(0.1)
    assert confidence["2:x~y"] == 1.0
    assert confidence["3:x~y"] == pytest.approx(0.0)
    # The judge's own score, which the analysis and the pilot's errors use, stays the order-averaged vote.
    assert scores["judge"].to_dict() == {"0:x~y": 1.0, "1:x~y": 1.0, "2:x~y": 1.0, "3:x~y": 0.5}
    plain = selection(units, {"votes": votes}, judge.drop(columns=["confidence", "soft_vote"]))
    assert plain["confidence"].to_dict() == {"0:x~y": 1.0, "1:x~y": 1.0, "2:x~y": 1.0, "3:x~y": 0.0}


@pytest.fixture(scope="module")
def label_server(tmp_path_factory):
    """hitkit's bot server hosting a tiny random Llama whose only likely first tokens are the labels."""
    torch = pytest.importorskip("torch", reason="needs the bots extra (torch)")
    from hitkit.bots.engine import HFBackend
    from hitkit.bots.hf_model import load_model
    from hitkit.bots.server import BotServer
    from tests.test_bots_server import WORDS, build_tiny_model

    words = [w for w in WORDS if w != "a"] + ["a", "b", "tie"]
    model, tokenizer = load_model(build_tiny_model(tmp_path_factory.mktemp("judge"), seed=3, words=words), device="cpu")
    with torch.no_grad():
        # Every other token's logit 0; the labels' about 3 (their rows share the direction of a judge prompt's
        # last hidden state) plus a random part: the labels come first, in proportions that vary by prompt.
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": "which is better ?"}], add_generation_prompt=True, return_dict=True
        )["input_ids"]
        h = model(input_ids=torch.tensor([list(ids)]), output_hidden_states=True).hidden_states[-1][0, -1]
        head = model.lm_head.weight
        keep = torch.tensor([tokenizer.convert_tokens_to_ids(w) for w in ("a", "b", "tie")])
        rows = head[keep] * 20 + 3 * h / h.square().sum()
        head.zero_()
        head[keep] = rows
    with BotServer({"judge": HFBackend("judge", model, tokenizer, max_batch=8, batch_window_ms=1)}, port=0) as srv:
        yield srv


@pytest.mark.parametrize("mode", ["auto", "logprobs"])
def test_a_judge_run_against_hitkits_bot_server_stores_logprob_confidences(tmp_path, database_url, label_server, mode):
    from hitkit.judges.judging import confidence_source, judge_study
    from tests.test_judge import judged_study

    study_file = judged_study(
        tmp_path, database_url, label_server.url, model="judge", confidence=mode, options={"max_tokens": 2}
    )
    config = load_study(study_file)
    upgrade(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, resolve_secret(database_url))
    report = judge_study(config, database_url, ctx.study_id)
    assert report.failed == [] and report.judged > 0
    with session_scope(database_url) as s:
        rows = s.scalars(select(JudgeLabel).where(JudgeLabel.source == "judge")).all()
        stored = [r.meta["confidence"] for r in rows if "confidence" in r.meta]
        assert len(stored) >= len(rows) // 2  # most replies start with a label
        assert all(0 <= c <= 1 for c in stored) and len(set(stored)) > 1
        for r in rows:
            if "confidence" in r.meta:
                assert r.parsed and r.meta["confidence"] == r.meta["label_probs"][r.label]
                assert sum(r.meta["label_probs"].values()) == pytest.approx(1, abs=1e-5)
        assert confidence_source(s, s.scalars(select(Study)).one()).startswith("logprobs")


def test_agreement_asks_for_no_logprobs_and_stores_no_confidence(tmp_path, database_url, label_server):
    from hitkit.judges.judging import confidence_source, judge_study
    from tests.test_judge import judged_study

    study_file = judged_study(
        tmp_path, database_url, label_server.url, model="judge", confidence="agreement", options={"max_tokens": 2}
    )
    config = load_study(study_file)
    upgrade(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, resolve_secret(database_url))
    assert judge_study(config, database_url, ctx.study_id).failed == []
    with session_scope(database_url) as s:
        assert not any("confidence" in r.meta for r in s.scalars(select(JudgeLabel)))
        assert confidence_source(s, s.scalars(select(Study)).one()) == "agreement"


def test_auto_asks_a_server_without_logprobs_again_without_them_and_logprobs_mode_fails():
    from hitkit.bots.client import BotClient, BotConfig, BotRequestError
    from hitkit.bots.corpus import Dialogue
    from hitkit.bots.degraded import DegradedBackend, DegradedBot
    from hitkit.bots.server import BotServer

    bot = DegradedBot([Dialogue("d1", ("hi there", "hello my friend")), Dialogue("d2", ("what is up", "not much"))])
    with BotServer({"qc": DegradedBackend("qc", bot)}, port=0) as srv:
        config = BotConfig(name="j", url=srv.url, model="qc", top_logprobs=10, retries=0)
        client = BotClient(config)
        for _ in range(2):  # refused once, then not asked again
            reply = client.reply_with_logprobs([{"role": "user", "content": "hi"}])
            assert reply.text and reply.logprobs is None
        assert srv.stats.requests == 3
        strict = BotClient(config.model_copy(update={"logprobs_required": True}))
        with pytest.raises(BotRequestError, match="logprobs are not available with the degraded backend"):
            strict.reply_with_logprobs([{"role": "user", "content": "hi"}])
