"""Pre-screening's pure parts, checked against hand-worked answers: ChatMatch's Algorithms 1-3 on
short conversations like the paper's Figure 2, distinct-n, BLEU-2, tf-idf cosine, Kendall τ, the
double round-robin and the tournament table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hitkit.prescreen import agreement, chateval
from hitkit.prescreen.dimensions import (
    concepts,
    contradictions,
    entities,
    fluency,
    new_entities,
    questions,
    rare_concepts,
    relevance,
    repetitions,
    score_turns,
    specificity,
)
from hitkit.prescreen.similarity import distinct_n, stem, tfidf_cosine, tokens
from hitkit.prescreen.tournament import (
    GameResult,
    double_round_robin,
    game_points,
    game_totals,
    standings,
    trueskill_average,
)

A, B = 0, 1


def alternating(n: int) -> list[int]:
    return [A, B] * (n // 2) + [A] * (n % 2)


# ---------------------------------------------------------------- similarity


def test_tokens_and_light_stemmer():
    assert tokens("Hi, I don't like CATS!") == ["hi", "i", "don't", "like", "cats"]
    assert [stem(w) for w in ("cats", "stories", "watches", "playing", "played", "stopped", "class", "bus")] == [
        "cat",
        "story",
        "watch",
        "play",
        "play",
        "stop",
        "class",
        "bus",
    ]


def test_tfidf_cosine_by_hand():
    # n = 2 documents; idf = ln((1 + n) / (1 + df)) + 1: "cat" (df 2) → 1, "dog"/"fish" (df 1) → 1 + ln 1.5.
    sim = tfidf_cosine(["cat dog", "cats fish"])
    w = 1 + math.log(1.5)
    assert sim[0, 1] == pytest.approx(1 / (1 + w * w))
    assert np.diag(sim) == pytest.approx([1, 1])
    empty = tfidf_cosine(["", "cat"])
    assert empty[0, 0] == 0 and empty[0, 1] == 0


# ---------------------------------------------------------------- Algorithm 1: repetition


def test_repeated_question_is_penalised_once_not_the_repeated_answer_that_follows():
    # Figure 2 style: A asks the same question twice; B answers it the same way twice.
    texts = [
        "Where do you live?",  # 0 A
        "I live in Paris.",  # 1 B
        "Where do you live?",  # 2 A: a repeated question → penalised
        "I live in Paris.",  # 3 B: the same answer to the repeated question → not penalised
        "Paris is lovely.",  # 4 A
        "I live in Paris.",
    ]  # 5 B: a repetition nobody asked for → penalised
    speakers = alternating(6)
    penalty, asked_again = repetitions(texts, speakers, tfidf_cosine(texts))
    assert penalty == [0, 0, 1, 0, 0, 1]
    assert asked_again == [[], [], [0], [], [], []]


def test_repetition_needs_the_same_speaker_and_the_threshold():
    texts = ["I like tea.", "I like tea.", "Do you?", "I like tea a lot, really a lot."]
    penalty, _ = repetitions(texts, alternating(4), tfidf_cosine(texts))
    assert penalty == [0, 0, 0, 0]  # turn 1 echoes the *other* speaker; turn 3 is not similar enough
    assert repetitions([""], [A], np.zeros((1, 1)))[0] == [1]  # an empty turn is penalised


# ---------------------------------------------------------------- Algorithm 2: consistency


def test_contradicted_answer_to_a_repeated_question_is_penalised():
    texts = ["Where do you live?", "I live in Paris.", "Where do you live?", "I live in London."]
    speakers = alternating(4)
    sim = tfidf_cosine(texts)
    penalty, asked_again = repetitions(texts, speakers, sim)
    assert penalty == [0, 0, 1, 0]  # "London" is no repetition of "Paris"
    assert contradictions(speakers, sim, asked_again) == [0, 0, 0, 1]
    # Hand check: tf-idf over the 4 turns; "i", "live", "in" are shared, "paris"/"london" are not.
    assert sim[3, 1] < 0.8


def test_a_consistent_answer_is_not_penalised():
    texts = ["Where do you live?", "I live in Paris.", "Where do you live?", "I live in Paris."]
    speakers = alternating(4)
    sim = tfidf_cosine(texts)
    _, asked_again = repetitions(texts, speakers, sim)
    assert contradictions(speakers, sim, asked_again) == [0, 0, 0, 0]


# ---------------------------------------------------------------- Algorithm 3: relevance

CONCEPT_TALK = [
    "I play guitar in a band.",  # 0: play guitar band
    "I play football and love music.",  # 1: play football love music
    "Music is fun, I love music.",  # 2: music fun love
    "I love football and play it daily.",  # 3: love football play daily
    "My guitar is old.",
]  # 4: guitar old


def test_rare_concepts_are_the_top_half_by_idf_ties_in_order_of_appearance():
    assert concepts(CONCEPT_TALK[0]) == ["play", "guitar", "band"]
    # Document frequencies: band fun daily old 1; guitar football music 2; play love 3. Nine concepts;
    # ranked by IDF (ties by first appearance): band fun daily old guitar | football music play love.
    # Rare: rank < 0.5 × 9, i.e. the first five.
    assert rare_concepts(CONCEPT_TALK) == {"band", "fun", "daily", "old", "guitar"}


def test_reused_rare_concept_is_rewarded():
    # Turn 4 brings back "guitar" (rare) from turn 0, four turns earlier → bonus.
    # Turn 3's "football" comes back from turn 1 but is not rare; turn 2's "music" echoes turn 1 and is
    # not rare either.
    assert relevance(CONCEPT_TALK) == [0, 0, 0, 0, 1]
    # Echoing the line just heard is no bonus (gap 1 < 2), even for a rare concept.
    assert relevance(
        ["I play guitar.", "Guitar is hard.", "Cats sleep.", "Dogs bark.", "Birds sing.", "Fish swim."], share=1.0
    ) == [0, 0, 0, 0, 0, 0]
    assert relevance(["I play guitar.", "Cats sleep.", "My guitar is new."], share=1.0) == [0, 0, 1]


# ---------------------------------------------------------------- the other dimensions


def test_entities_questions_and_specificity():
    assert entities("I went to New York with Harry Potter. Hi! The Beatles rock, I'm sure.") == [
        "New York",
        "Harry Potter",
        "Beatles",
    ]
    assert new_entities(["I love Paris.", "Paris and Rome!", "Yes, Rome."]) == [1, 1, 0]
    assert questions(["How are you?", "Fine.", "And you? Good."]) == [1, 0, 1]
    # "the cat the cat": distinct-1 = 2/4, distinct-2 = 2/4 (the-cat, cat-the over 4 tokens, as
    # Li et al., whom ChatMatch cites; not 2/3 bigrams).
    assert specificity(["the cat the cat"]) == pytest.approx([(0.5 + 0.5) / 2])
    assert distinct_n(["a"], 2) == 0.0


def test_fluency_caps_perplexity_and_gives_empty_turns_the_cap():
    seen = []

    def fake_ppl(texts):
        seen.extend(texts)
        return [10.0 if t == "fine" else 9000.0 for t in texts]

    assert fluency(["fine", "", "awful"], fake_ppl, cap=500) == [10.0, 500.0, 500.0]
    assert seen == ["fine", "awful"]


# ---------------------------------------------------------------- ChatEval metrics


def test_distinct_n_divides_by_tokens_by_hand():
    # 5 tokens a a b | a b: 2 distinct unigrams / 5 tokens; bigrams (a a) (a b) | (a b): 2
    # distinct / 5 tokens (Li et al. 2016 and ChatEval divide by tokens, not by the 3 bigrams).
    assert distinct_n(["a a b", "a b"], 1) == pytest.approx(2 / 5)
    assert distinct_n(["a a b", "a b"], 2) == pytest.approx(2 / 5)
    assert distinct_n(["a b c d"], 2) == pytest.approx(3 / 4)
    assert distinct_n([""], 1) == 0.0 and distinct_n(["a"], 2) == 0.0


def test_sentence_bleu2_by_hand():
    # p1 = 5/6 (the ×2, cat, on, mat), p2 = 3/5 (the cat, on the, the mat), c = r = 6 → BP = 1.
    assert chateval.sentence_bleu2("the cat sat on the mat", "the cat is on the mat") == pytest.approx(
        math.sqrt(5 / 6 * 3 / 5)
    )
    # p1 = 1/3, no bigram matches → smoothed 0.1/2; c = 3 < r = 4 → BP = exp(1 − 4/3).
    assert chateval.sentence_bleu2("the dog barked", "the cat meowed loudly") == pytest.approx(
        math.exp(1 - 4 / 3) * math.sqrt(1 / 3 * 0.1 / 2)
    )
    assert chateval.sentence_bleu2("nothing shared", "the cat") == 0.0
    assert chateval.sentence_bleu2("", "the cat") == 0.0


def test_mean_cosine_and_system_metrics_without_models():
    def embed(texts):
        return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts])

    assert chateval.mean_cosine(["a cat", "a dog"], ["the cat", "the cat"], embed) == pytest.approx(0.5)
    metrics = chateval.system_metrics(["p1", "p2"], ["a cat", "a dog"], ["the cat", None], embed=embed)
    assert metrics["with_reference"] == 1 and metrics["embedding_cosine"] == pytest.approx(1.0)
    assert math.isnan(metrics["perplexity"])


# ---------------------------------------------------------------- agreement


def test_kendall_tau_by_hand():
    # Pairs (a,b) and (a,c) concordant, (b,c) discordant: τ = (2 − 1) / 3.
    found = agreement.kendall_tau({"a": 1, "b": 2, "c": 3, "x": 4}, {"a": 1, "b": 3, "c": 2})
    assert found.tau == pytest.approx(1 / 3) and found.n == 3
    assert math.isnan(agreement.kendall_tau({"a": 1}, {"a": 1}).tau)
    assert agreement.simulated_ranking({"a": 0.9, "c": 0.2}, ["a", "b", "c"]) == {"a": 1.0, "b": 2.0, "c": 3.0}


# ---------------------------------------------------------------- the tournament


def test_double_round_robin_every_pair_twice_each_bot_starting_once():
    games = double_round_robin(["a", "b", "c"])
    assert len(games) == 6 and len(set(games)) == 6
    assert sorted(games) == sorted([(x, y) for x in "abc" for y in "abc" if x != y])
    with pytest.raises(ValueError):
        double_round_robin(["a", "a"])


def test_game_points_respect_the_direction_of_each_dimension():
    a = {
        "fluency": 20,
        "knowledge": 1,
        "proactivity": 3,
        "specificity": 0.9,
        "diversity": 0,
        "consistency": 1,
        "relevance": 2,
    }
    b = {
        "fluency": 30,
        "knowledge": 1,
        "proactivity": 1,
        "specificity": 0.8,
        "diversity": 2,
        "consistency": 0,
        "relevance": 2,
    }
    pa, pb = game_points(a, b)
    assert pa == {
        "fluency": 1,
        "knowledge": 0,
        "proactivity": 1,
        "specificity": 1,
        "diversity": 1,
        "consistency": 0,
        "relevance": 0,
    }
    assert pb == {
        "fluency": 0,
        "knowledge": 0,
        "proactivity": 0,
        "specificity": 0,
        "diversity": 0,
        "consistency": 1,
        "relevance": 0,
    }


def test_game_totals_leave_out_the_start_and_repeated_turns():
    texts = ["Hi there!", "Where do you live?", "In Paris, France.", "Where do you live?", "In Paris, France."]
    speakers = [B, A, B, A, B]  # turn 0 is the starting utterance, given to the opponent
    scores = score_turns(texts, speakers, [100.0, 10.0, 20.0, 30.0, 40.0])
    assert scores.repetition == [0, 0, 0, 1, 0]
    a, b = game_totals(scores, speakers)
    assert a["diversity"] == 1 and b["diversity"] == 0
    assert a["proactivity"] == 1  # the repeated question earns nothing
    assert a["fluency"] == 10.0 and b["fluency"] == 30.0  # means over kept turns, the start left out
    assert a["knowledge"] == 0 and b["knowledge"] == pytest.approx(2 / 2)  # Paris, France in 2 turns


def test_standings_count_wins_ties_losses_and_rank_by_trueskill():
    games = [
        GameResult("1", "a", "b", 5, 2),
        GameResult("2", "b", "a", 1, 4),
        GameResult("3", "a", "c", 6, 0),
        GameResult("4", "c", "a", 3, 3),
        GameResult("5", "b", "c", 4, 2),
        GameResult("6", "c", "b", 2, 4),
    ]
    table = standings(games, ["a", "b", "c"], shuffles=50, seed=1).set_index("system")
    assert table.loc["a", ["wins", "ties", "losses", "points"]].tolist() == [3, 1, 0, 10]
    assert table.loc["b", ["wins", "ties", "losses", "points"]].tolist() == [2, 0, 2, 6]
    assert table.loc["c", ["wins", "ties", "losses", "points"]].tolist() == [0, 1, 3, 1]
    assert table["rank_trueskill"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert table["rank_points"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert table.loc["a", "dimension_points"] == 5 + 4 + 6 + 3


def test_trueskill_average_is_seeded_and_order_matters():
    games = [GameResult("1", "a", "b", 1, 0), GameResult("2", "b", "a", 1, 0)]
    mu1, _ = trueskill_average(games, ["a", "b"], shuffles=20, seed=3)
    mu2, _ = trueskill_average(games, ["a", "b"], shuffles=20, seed=3)
    assert mu1.tolist() == mu2.tolist()
    # One win each: over many shuffled orders the two come out level.
    mu, _ = trueskill_average(games, ["a", "b"], shuffles=2000, seed=0)
    assert mu[0] == pytest.approx(mu[1], abs=0.2)


def test_human_rankings_from_a_csv_or_an_analysis_folder(tmp_path):
    (tmp_path / "scores.csv").write_text("system,score\na,0.1\nb,0.7\nc,0.4\n")
    assert agreement.human_ranking_from_csv(tmp_path / "scores.csv") == {"a": 3.0, "b": 1.0, "c": 2.0}
    live = tmp_path / "analysis"
    live.mkdir()
    (live / "systems.csv").write_text("system,n,z,raw,rank\nx,10,0.5,60,1\ny,10,-0.2,40,2\n")
    assert agreement.human_ranking_from_analysis(live) == {"x": 1.0, "y": 2.0}
    with pytest.raises(Exception, match="ranking.csv"):
        agreement.human_ranking_from_analysis(tmp_path / "scores.csv")
