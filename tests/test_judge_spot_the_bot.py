"""Spot The Bot studies with an LLM judge (the study file's ``judge:``): a scripted OpenAI-compatible judge
over real HTTP labels both speakers of every segment, the simulated crowd annotates a random share, and
the analysis reports human-only, judge-only and prediction-powered win rates (a ratio of means)."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
import yaml
from sqlalchemy import select

from hitkit.analysis import ppi_ratio
from hitkit.db.models import Assignment, Hit, HitUnit, JudgeLabel, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.judges.human_subset import human_subset
from hitkit.protocols import task_for
from hitkit.protocols.spot_the_bot.judge import parse, requests
from hitkit.protocols.spot_the_bot.judge_analysis import analysis_tables, conversation_totals, items, win_rates
from hitkit.protocols.spot_the_bot.packing import SourceConversation, pack_share
from hitkit.study.loading import load_study
from hitkit.tables.schema import DONE_STATUSES
from tests.studies import REPO, launch
from tests.test_judge import JudgeServer, serving
from tests.test_spot_the_bot_study import LENGTHS, QUALITY, stb_study, write_bot_bot, write_human_human

FAVOURED = "gamma"
"""The scripted judge's pet system: it takes gamma's speakers for people far more often than people do."""
PER_PAIR, HUMANS = 4, 5
SEGMENTS = (6 * PER_PAIR + HUMANS) * len(LENGTHS)  # six pairs with self-chat, and the human–human material


class ScriptedJudge(JudgeServer):
    """An OpenAI-compatible judge: reads the segment from the prompt, knows who wrote each speaker's lines
    (a system's lines start with its name, a person's with 'person'), and labels each speaker, taking a
    bot for a person about as often as the simulated crowd does (far more often: :data:`FAVOURED`). Deterministic per prompt; its
    replies vary in form, and one in about twenty names no label."""

    def answer(self, prompt: str) -> tuple[int, str]:
        with self.lock:
            self.prompts.append(prompt)
        rng = random.Random(hashlib.sha256(prompt.encode()).hexdigest())
        if rng.random() < 0.05:
            return 200, "I cannot decide from so little."
        labels = []
        for name in "AB":
            writer = re.search(rf"^Speaker {name}: (\w+)", prompt, re.M).group(1)
            if writer == "person":
                labels.append(rng.choices(["human", "unsure", "bot"], [0.85, 0.1, 0.05])[0])
                continue
            # As the simulated crowd sees a bot (unspotted over k exchanges), far kinder to its pet.
            k = prompt.count(f"Speaker {name}: ")
            human = 0.75 * ((1 + QUALITY[writer]) / 2) ** k + (0.5 if writer == FAVOURED else 0.0)
            labels.append("human" if rng.random() < human else "bot")
        form = rng.choice(
            [
                "Speaker A: {}, Speaker B: {}",
                "**Speaker 1**: {}\n**Speaker 2**: {}",
                "Speaker A is a {}. Speaker B is a {}.",
            ]
        )
        return 200, form.format(*labels)


@pytest.fixture
def judge_server():
    yield from serving(ScriptedJudge())


def judged_stb_study(tmp_path, database_url, judge_url, **judge):
    """Spot The Bot's test study with four conversations per pair, five human–human ones and a judge."""
    path = stb_study(tmp_path, database_url, human_count=HUMANS)
    write_bot_bot(tmp_path / "bot_bot.jsonl", per_pair=PER_PAIR)
    write_human_human(tmp_path / "human.jsonl", count=HUMANS + 1)
    data = yaml.safe_load(path.read_text())
    data["judge"] = {
        "url": judge_url,
        "model": "scripted-judge",
        "human_share": 0.4,
        "options": {"retries": 0, "backoff_s": 0, "timeout_s": 10, "concurrency": 4},
        **judge,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_judged_spot_the_bot_study_labels_every_segment_and_reports_prediction_powered_win_rates(
    tmp_path, one_database_url, judge_server
):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = judged_stb_study(tmp_path, database_url, judge_server.url)
    lines = []
    result = launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=300)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "stb-demo"

    # Every segment judged once, both speakers in one reply, in the page's order (Speaker A = entity 0).
    assert len(judge_server.prompts) == SEGMENTS == len(set(judge_server.prompts))
    assert all(p.count("\nSpeaker A: ") + p.startswith("Speaker A: ") >= 2 for p in judge_server.prompts)
    with session_scope(database_url) as s:
        labels = s.scalars(select(JudgeLabel)).all()
        assert len(labels) == SEGMENTS and {r.status for r in labels} == {"done"}
        assert all(re.fullmatch(r"(human|bot|unsure),(human|bot|unsure)", r.label) for r in labels)
        unparsed = [r for r in labels if not r.parsed]
        assert unparsed and all(r.label == "unsure,unsure" for r in unparsed)
        # Only the crowd's share became units: 40 % of each pair's 4 conversations (2) and of the 5 human–human
        # ones (2), each with all its 3 segments.
        units = {u.id: u for u in s.scalars(select(Unit))}
        strata = Counter("~".join(sorted(u.payload["systems"])) for u in units.values())
        assert strata == {
            **{p: 6 for p in ("alpha~alpha", "alpha~beta", "alpha~gamma", "beta~beta", "beta~gamma", "gamma~gamma")},
            "human~human": 6,
        }
        assert s.scalar(select(Study.status)) == "completed"
        # Packing of the share: every unit in one HIT, never two segments of one conversation in a HIT.
        hit_units = defaultdict(list)
        for hit_id, unit_id in s.execute(select(HitUnit.hit_id, HitUnit.unit_id)):
            hit_units[hit_id].append(units[unit_id])
        assert sorted(u.id for us in hit_units.values() for u in us) == sorted(units)
        for us in hit_units.values():
            assert len(us) <= 8 and len({u.conversation_id for u in us}) == len(us)
        # No worker was shown two segments of one conversation; every unit annotated twice.
        shown, annotated = defaultdict(list), Counter()
        for a in s.scalars(select(Assignment)):
            shown[a.worker_id].extend(u.conversation_id for u in hit_units[a.hit_id])
            if a.status in DONE_STATUSES:
                annotated.update(u.id for u in hit_units[a.hit_id])
        assert all(len(c) == len(set(c)) for c in shown.values())
        assert set(annotated.values()) == {2} and len(annotated) == len(units)
        assert s.scalar(select(Hit.max_assignments).limit(1)) == 2

    export = out / "export"
    judge = pd.read_csv(export / "judge.csv", dtype={"conversation_id": str})
    assert len(judge) == 2 * SEGMENTS and judge["human_subset"].sum() == 2 * len(units)
    assert set(judge["label"]) <= {"human", "bot", "unsure"}
    annotations = pd.read_csv(export / "annotations.csv", dtype={"conversation_id": str})
    key = ["conversation_id", "segment_exchanges"]
    annotated_segments = set(annotations[key].itertuples(index=False, name=None))
    subset = set(judge.loc[judge["human_subset"], key].itertuples(index=False, name=None))
    assert annotated_segments == subset  # the crowd annotated the share, all of it, and nothing else
    # Drawn by conversation: each conversation's segments are all in the crowd's share or none are.
    drawn = judge.groupby("conversation_id")["human_subset"].agg(["all", "any"])
    assert (drawn["all"] == drawn["any"]).all() and drawn["all"].sum() == 6 * 2 + 2

    rates = pd.read_csv(out / "analysis" / "judge_win_rates.csv")
    assert list(rates[["system_a", "system_b"]].itertuples(index=False, name=None)) == [
        ("alpha", "beta"),
        ("alpha", "gamma"),
        ("beta", "gamma"),
    ]
    assert (rates["n_human"] == 6).all() and (rates["n_judge"] == 12).all()
    for kind in ("human", "ppi"):
        assert ((rates[f"{kind}_low"] <= rates[kind]) & (rates[kind] <= rates[f"{kind}_high"])).all()
    assert rates["lam"].between(0, 1).all() and (rates["fallback"] == (rates["lam"] == 0)).all()
    # The judge's pet system: taken for a person far more often by the judge than by people.
    bias = pd.read_csv(out / "analysis" / "judge_bias.csv").set_index("system")["bias"]
    assert set(bias.index) == {"alpha", "beta", "gamma", "human"}
    assert bias.idxmax() == FAVOURED and bias[FAVOURED] > 0.2
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert summary["judge"]["items"] == SEGMENTS and summary["judge"]["human_items"] == 18
    assert summary["judge"]["conversations"] == 12 and summary["judge"]["human_conversations"] == 6
    assert any(line.startswith(f"Judge: {SEGMENTS} labels planned") for line in lines)

    from hitkit.report.build import report

    files = report(out, tmp_path / "report")
    assert "People and the LLM judge" in files.html.read_text()
    assert "PPI++" in files.methods and "ratio of means" in files.methods and "jackknife t" in files.methods


def test_a_reply_becomes_both_speakers_labels():
    replies = {
        "Speaker A: bot, Speaker B: human": "bot,human",
        "Speaker 1: Human\nSpeaker 2: BOT": "human,bot",
        "**Speaker B**: a person. **Speaker A**: not sure": "unsure,human",
        "Speaker A is a chatbot; Speaker B is an AI.": "bot,bot",
        "Speaker B: human.": "unsure,human",
        "human, bot": "human,bot",
        "Speaker A: can't tell, Speaker B: machine": "unsure,bot",
        "I cannot decide.": None,
        "Speaker B: Human beings are curious. Speaker A: I agree": None,
        "Speaker A: bot (it repeats itself) and Speaker B: human": "bot,human",
        "bot": None,
        "": None,
    }
    assert {reply: parse(reply) for reply in replies} == replies


def test_the_ratio_estimate_with_lambda_zero_is_the_human_only_ratio_exactly():
    rng = np.random.default_rng(7)
    outcome = rng.choice(3, size=80, p=[0.5, 0.3, 0.2])  # win, loss, tie
    judged = np.where(rng.random(80) < 0.7, outcome, rng.choice(3, size=80))
    y, z = (outcome == 0).astype(float), (outcome != 2).astype(float)
    f, g = (judged == 0).astype(float), (judged != 2).astype(float)
    fixed = ppi_ratio.ppi_ratio(y[:30], z[:30], f[:30], g[:30], f[30:], g[30:], lam=0.0)
    human = ppi_ratio.ratio_interval(y[:30], z[:30])
    assert fixed.estimate == human.estimate and (fixed.low, fixed.high) == (human.low, human.high)
    assert fixed.estimate == pytest.approx(y[:30].sum() / z[:30].sum(), abs=1e-15) and fixed.lam == 0
    assert fixed.n_effective == pytest.approx(30)
    # The jackknife of a ratio: by hand.
    leave_out = [(y[:30].sum() - y[i]) / (z[:30].sum() - z[i]) for i in range(30)]
    se = math.sqrt(29 / 30 * np.sum((np.array(leave_out) - np.mean(leave_out)) ** 2))
    assert fixed.se == pytest.approx(se, rel=1e-12)
    fitted = ppi_ratio.ppi_ratio(y[:30], z[:30], f[:30], g[:30], f[30:], g[30:])
    assert 0 < fitted.lam <= 1 and fitted.human == human
    one = ppi_ratio.ppi_ratio(y[:30], z[:30], f[:30], g[:30], f[30:], g[30:], lam=1.0)
    expected = (y[:30].mean() + f[30:].mean() - f[:30].mean()) / (z[:30].mean() + g[30:].mean() - g[:30].mean())
    assert one.estimate == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("lam", [None, 0.0, 0.4])
def test_the_vectorised_leave_one_out_ratios_equal_refitting_without_each_item(lam):
    from hitkit.analysis.ppi_ratio import _ratio_fit, _ratio_leave_out

    rng = np.random.default_rng(3)
    for n, big_n in [(2, 5), (3, 0), (12, 30), (40, 7)]:
        y = rng.integers(0, 3, n) / 2
        z = np.maximum(y, rng.integers(0, 3, n) / 2)
        fh, fu = (rng.random(n) < 0.5) * 1.0, (rng.random(big_n) < 0.5) * 1.0
        gh, gu = np.maximum(fh, rng.random(n) < 0.5), np.maximum(fu, rng.random(big_n) < 0.5)
        keep = ~np.eye(n, dtype=bool)
        refitted = [_ratio_fit(y[k], z[k], fh[k], gh[k], fu, gu, lam)[0] for k in keep]
        assert np.allclose(_ratio_leave_out(y, z, fh, gh, fu, gu, lam), refitted, rtol=1e-10, equal_nan=True)


def test_the_prediction_powered_ratio_covers_at_its_level_and_a_good_judge_narrows_it():
    # 200 seeded studies of 300 items, 60 with a human label; the judge copies the human outcome 80 % of
    # the time and otherwise draws a biased one (it calls more losses). θ = 0.5 / 0.8.
    rng = np.random.default_rng(2024)
    theta, covered, human_covered, widths = 0.5 / 0.8, 0, 0, []
    for _ in range(200):
        outcome = rng.choice(3, size=300, p=[0.5, 0.3, 0.2])
        judged = np.where(rng.random(300) < 0.8, outcome, rng.choice(3, size=300, p=[0.3, 0.4, 0.3]))
        y, z = (outcome == 0).astype(float), (outcome != 2).astype(float)
        f, g = (judged == 0).astype(float), (judged != 2).astype(float)
        est = ppi_ratio.ppi_ratio(y[:60], z[:60], f[:60], g[:60], f[60:], g[60:])
        covered += est.low <= theta <= est.high
        human_covered += est.human.low <= theta <= est.human.high
        widths.append((est.high - est.low) / (est.human.high - est.human.low))
    assert 0.91 <= covered / 200 <= 0.99 and 0.91 <= human_covered / 200 <= 0.99
    assert np.mean(widths) < 0.8  # 0.72 measured


def _studies_with_conversation_effects(n_studies: int, seed: int):
    """Seeded studies of one pair: 150 conversations of 3 segments, a fifth of the conversations drawn for
    people. A conversation is good or bad for system_a (half each: win, loss, tie 0.7, 0.1, 0.2 or 0.2, 0.6,
    0.2) and its segments, prefixes of each other, mostly share one outcome: each is the conversation's
    with probability 0.7, else a fresh draw. The judge copies the people's outcome 80 % of the time, else
    draws a biased one. θ = 0.45 / 0.8. Yields :func:`items`-shaped tables."""
    rng = np.random.default_rng(seed)
    for _ in range(n_studies):
        conversation, outcome, judged = conversation_outcomes(rng)
        yield outcome_items(conversation, outcome, judged, np.isin(conversation, rng.choice(150, 30, replace=False)))


def conversation_outcomes(rng: np.random.Generator, n: int = 150, segments: int = 3):
    """One pair's conversations with conversation effects (as :func:`_studies_with_conversation_effects`
    describes): each segment's conversation, the people's outcome (0 win, 1 loss, 2 tie for system_a) and the
    judge's."""
    p = np.array([[0.7, 0.1, 0.2], [0.2, 0.6, 0.2]])
    conversation = np.repeat(np.arange(n), segments)
    good = rng.random(n) < 0.5
    probs = p[np.where(good, 0, 1)][conversation]
    fresh = (rng.random((n * segments, 1)) > probs.cumsum(axis=1)).sum(axis=1)
    base = np.repeat((rng.random((n, 1)) > p[np.where(good, 0, 1)].cumsum(axis=1)).sum(axis=1), segments)
    outcome = np.where(rng.random(n * segments) < 0.7, base, fresh)
    judged = np.where(rng.random(n * segments) < 0.8, outcome, rng.choice(3, size=n * segments, p=[0.3, 0.4, 0.3]))
    return conversation, outcome, judged


def outcome_items(conversation, outcome, judged, drawn, segments: int = 3) -> pd.DataFrame:
    """:func:`items`-shaped rows of one pair from :func:`conversation_outcomes`, people's where ``drawn``."""
    return pd.DataFrame(
        {
            "study": "s",
            "conversation_id": conversation.astype(str),
            "segment_exchanges": np.tile(np.arange(segments), conversation.size // segments),
            "system_a": "alpha",
            "system_b": "beta",
            "human_subset": drawn,
            "human_wins": np.where(drawn, outcome == 0, np.nan),
            "human_decisive": np.where(drawn, outcome != 2, np.nan),
            "judge_wins": (judged == 0) * 1.0,
            "judge_decisive": (judged != 2) * 1.0,
        }
    )


def test_with_conversation_effects_the_conversation_level_ratio_covers_at_its_level():
    # Segments of one conversation are dependent: treated as independent items, the intervals are too
    # narrow; resampling conversations (win_rates) covers. 200 studies: PPI 0.965 and people only 0.955
    # measured (segment-level: 0.885 and 0.790).
    theta, counts = 0.45 / 0.8, Counter()
    for per_item in _studies_with_conversation_effects(200, 5):
        rate = win_rates(per_item).iloc[0]
        counts["ppi"] += rate["ppi_low"] <= theta <= rate["ppi_high"]
        counts["human"] += rate["human_low"] <= theta <= rate["human_high"]
        h = per_item["human_subset"].to_numpy()
        cols = [per_item[c].to_numpy(float) for c in ("human_wins", "human_decisive", "judge_wins", "judge_decisive")]
        naive = ppi_ratio.ppi_ratio(cols[0][h], cols[1][h], cols[2][h], cols[3][h], cols[2][~h], cols[3][~h])
        counts["segment_ppi"] += naive.low <= theta <= naive.high
        counts["segment_human"] += naive.human.low <= theta <= naive.human.high
    assert 0.92 <= counts["ppi"] / 200 <= 0.98 and 0.92 <= counts["human"] / 200 <= 0.98
    assert counts["segment_ppi"] < counts["ppi"] and counts["segment_human"] < counts["human"]


def test_segment_items_and_tables_from_annotations_and_the_judge():
    def rows(study, conversation, k, systems, labels, **extra):
        return [
            {
                "study": study,
                "conversation_id": conversation,
                "segment_exchanges": k,
                "entity": e,
                "system": systems[e],
                "label": labels[e],
                **extra,
            }
            for e in (0, 1)
        ]

    # c1 (beta speaks first): two annotations, one tie; c2: nobody; hh: human–human.
    annotations = pd.DataFrame(
        rows("s", "c1", 2, ["beta", "alpha"], ["bot", "human"], assignment_id="a1")
        + rows("s", "c1", 2, ["beta", "alpha"], ["unsure", "unsure"], assignment_id="a2")
        + rows("s", "c3", 3, ["alpha", "beta"], ["human", "bot"], assignment_id="a1")
        + rows("s", "hh", 2, ["human", "human"], ["human", "bot"], assignment_id="a1")
    )
    judge = pd.DataFrame(
        rows("s", "c1", 2, ["beta", "alpha"], ["human", "bot"], parsed=True, model="m", human_subset=True)
        + rows("s", "c2", 2, ["alpha", "beta"], ["human", "unsure"], parsed=False, model="m", human_subset=False)
        + rows("s", "c3", 3, ["alpha", "beta"], ["human", "human"], parsed=True, model="m", human_subset=True)
        + rows("s", "hh", 2, ["human", "human"], ["human", "human"], parsed=True, model="m", human_subset=True)
    )
    table = items(annotations, judge).set_index("conversation_id")
    assert list(table.index) == ["c1", "c2", "c3"]  # human–human material is no pair of bots
    assert (table.loc["c1", "system_a"], table.loc["c1", "system_b"]) == ("alpha", "beta")
    assert table.loc["c1", "human_wins"] == 0.5 and table.loc["c1", "human_decisive"] == 0.5
    assert table.loc["c1", "judge_wins"] == 0 and table.loc["c1", "judge_decisive"] == 1
    assert math.isnan(table.loc["c2", "human_wins"]) and table.loc["c2", "judge_wins"] == 1
    assert table.loc["c3", "human_wins"] == 1 and table.loc["c3", "judge_decisive"] == 0
    tables, summary, lines = analysis_tables(annotations, judge)
    bias = tables["judge_bias"].set_index("system")
    # alpha: c1 judge 0 (bot) − people ½ (one human of two), c3 1 − 1; beta: 1 − 0 twice; human: one segment.
    assert bias.loc["alpha", "bias"] == -0.25 and bias.loc["beta", "bias"] == 1
    assert bias.loc["human", "n_human"] == 1 and math.isnan(bias.loc["human", "bias"])
    assert summary["items"] == 4 and summary["unparsed"] == 1 and summary["human_items"] == 2 and lines == []
    rate = tables["judge_win_rates"].iloc[0]
    assert (rate["system_a"], rate["system_b"], rate["n_human"], rate["n_judge"]) == ("alpha", "beta", 2, 3)
    assert rate["human"] == 1.0  # Σ wins / Σ decisive = (½ + 1) / (½ + 1)
    assert summary["conversations"] == 3 and summary["human_conversations"] == 2

    # Labelled by design: c2 drawn too but nobody annotated it is left out of both sides, with a warning;
    # c1 gains an unannotated segment of its own, whose judge label is left out of c1's judged side.
    more = pd.concat(
        [
            judge.assign(human_subset=True),
            pd.DataFrame(
                rows("s", "c1", 4, ["beta", "alpha"], ["bot", "human"], parsed=True, model="m", human_subset=True)
            ),
        ]
    )
    totals = conversation_totals(items(annotations, more)).set_index("conversation_id")
    assert list(totals["labelled"]) == [True, False, True] and totals.loc["c1", "segments"] == 2
    assert totals.loc["c1", "judge_wins"] == 0 and totals.loc["c1", "judge_decisive"] == 1
    assert math.isnan(totals.loc["c2", "human_wins"])
    tables, summary, lines = analysis_tables(annotations, more)
    assert any(
        line.startswith("1 conversation(s) drawn for the crowd have no annotations") and "at random" in line
        for line in lines
    )
    assert any(line.startswith("1 segment(s) of annotated conversations") for line in lines)
    rate = tables["judge_win_rates"].iloc[0]
    assert (rate["n_human"], rate["n_judge"], rate["human"]) == (2, 4, 1.0)
    with pytest.raises(ValueError, match="human_subset"):
        items(annotations, judge.drop(columns="human_subset"))


def _segments(n_conversations: int, n_human: int, lengths, share: float, seed: int):
    rng = random.Random(seed)
    conversations = [SourceConversation(f"c{i}", i < n_human) for i in range(n_conversations)]
    available = {c.key: [k for k in lengths if rng.random() < share] for c in conversations}
    return conversations, available


@pytest.mark.parametrize("share", [0.4, 1.0])  # 1.0: whole conversations, as the crowd's share is drawn
@pytest.mark.parametrize("seed", range(20))
def test_packing_a_share_keeps_conversations_apart_and_hits_within_their_size(seed, share):
    lengths, per_hit = [2, 3, 5], 6
    conversations, available = _segments(40, 8, lengths, share, seed)
    hits = pack_share(conversations, available, lengths, per_hit, random.Random(seed))
    placed = Counter((s.conversation, s.k) for hit in hits for s in hit)
    assert placed == Counter((c, k) for c, ks in available.items() for k in ks)  # each exactly once
    assert all(0 < len(hit) <= per_hit and len({s.conversation for s in hit}) == len(hit) for hit in hits)
    # A conversation's segments share HITs only with those of its own block: the HITs holding any of
    # them hold no conversation whose segments also lie outside these HITs.
    where = defaultdict(set)
    for i, hit in enumerate(hits):
        for s in hit:
            where[s.conversation].add(i)
    for _c, at in where.items():
        block = set().union(*(where[s.conversation] for i in at for s in hits[i]))
        assert len(block) <= len(lengths)
    # Full HITs, nearly: no more HITs than one block's worth beyond the fewest possible.
    assert len(hits) <= math.ceil(sum(placed.values()) / per_hit) + len(lengths)


def test_a_share_too_small_for_a_hit_is_refused_clearly():
    conversations = [SourceConversation("h", True), SourceConversation("b", False), SourceConversation("b2", False)]
    with pytest.raises(ConfigError, match="0 human–human conversation.*raise the share"):
        pack_share(conversations, {"b": [2], "b2": [3]}, [2, 3], 4, random.Random(0))


def test_the_crowds_share_is_drawn_by_conversation_within_each_pair_and_the_human_human_material(
    tmp_path, database_url
):
    config = load_study(judged_stb_study(tmp_path, database_url, "http://127.0.0.1:9", human_share=0.5))
    units = task_for(config).build().units
    chosen = human_subset(config, units)
    assert [u.key for u in chosen] == [u.key for u in human_subset(config, units)]  # seeded
    strata = Counter("~".join(sorted(u.payload["systems"])) for u in chosen)
    # Half of each pair's 4 conversations, 2.5 of the 5 human–human ones rounded up: 3 segments each.
    assert strata["human~human"] == 9 and strata["alpha~beta"] == 6 and len(strata) == 7
    per_conversation = Counter(u.payload["conversation"] for u in chosen)
    assert set(per_conversation.values()) == {len(LENGTHS)}  # whole conversations
    assert len(requests(units)) == len(units) == SEGMENTS
    small = config.model_copy(update={"judge": config.judge.model_copy(update={"human_share": 0.25})})
    with pytest.raises(ConfigError, match="sends 1 of the 4 conversations of .* to the crowd"):
        human_subset(small, units)
    counted = config.model_copy(
        update={"judge": config.judge.model_copy(update={"human_share": None, "human_items": 30})}
    )
    with pytest.raises(
        ConfigError,
        match="human_items cannot size a spot_the_bot study's human share: it is drawn by whole conversations",
    ):
        human_subset(counted, units)
    with pytest.raises(ConfigError, match="human_items cannot size a spot_the_bot study"):
        load_study(judged_stb_study(tmp_path, database_url, "http://127.0.0.1:9", human_share=None, human_items=30))


@pytest.mark.parametrize(
    "prompt, message",
    [
        ("Who is a bot?", "it lacks {conversation}"),
        ("{conversation} {prompt}", "it names {prompt}"),
    ],
)
def test_a_judge_prompt_must_name_the_conversation(tmp_path, database_url, prompt, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_study(judged_stb_study(tmp_path, database_url, "http://127.0.0.1:9", prompt=prompt))


def test_the_example_judged_spot_the_bot_study_validates():
    config = load_study(REPO / "examples" / "spot_the_bot_judge.yaml")
    assert config.task == "spot_the_bot" and config.judge is not None
