"""ChatMatch's seven per-turn scores (Yang et al., "ChatMatch: Evaluating Chatbots by Autonomous
Chat Tournaments", ACL 2022), as pure functions over one conversation's turns.

A conversation is given as ``texts`` (one string per turn) and ``speakers`` (who said each turn,
0 or 1). Every function returns one number per turn; :func:`score_turns` bundles them. Turn 0 is
the starting utterance of a game: it is context for every scorer and scored like any turn, but
the tournament leaves it out of both bots' totals.

| dimension | per turn | better |
|---|---|---|
| fluency | perplexity under a local language model, capped | lower |
| knowledge | entities mentioned for the first time in the conversation | more |
| proactivity | 1 if the turn raises a question (contains "?") | more |
| specificity | mean of the turn's distinct-1 and distinct-2 | higher |
| diversity | repetition penalty, Algorithm 1 | fewer |
| consistency | contradiction penalty, Algorithm 2 | fewer |
| relevance | IDF concept bonus, Algorithm 3 | more |

Entities: ChatMatch used a named-entity tagger (stanza), which cannot be installed offline here.
:func:`entities` is a documented heuristic instead: maximal runs of capitalised words, wherever
they stand, minus "I", stopwords and chat interjections ("Hi", "Yes", "Well"). It finds "Paris",
"New York", "Harry Potter"; it also counts a common noun capitalised at the start of a sentence
("Cooking is fun"), and misses entities written in lower case.

Concepts (Algorithm 3): ChatMatch kept the words a POS tagger marked as nouns, verbs and
adjectives. Here a concept is a stemmed, alphabetic token of three or more letters that is not a
stopword — the same idea without a tagger.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hitkit.prescreen.similarity import distinct_n, idf, stem, tfidf_cosine, tokens

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each either else ever every few for from further get gets got had hadn't has
hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how how's
i i'd i'll i'm i've if in into is isn't it it's its itself just let's like lot lots made make many
may maybe me might mine more most much must mustn't my myself need no nor not now of off on once one
only or other ought our ours ourselves out over own really same shall shan't she she'd she'll she's
should shouldn't so some something still such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've thing things this those though through thus
to too under until up upon us very was wasn't we we'd we'll we're we've were weren't what what's
when when's where where's whether which while who who's whom why why's will with won't would
wouldn't yet you you'd you'll you're you've your yours yourself yourselves hi hello hey yes yeah yep
no nope oh ah ok okay sure well wow thanks thank please sorry great good nice cool fine right know
think going want go say said tell told see
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that are neither concepts nor entities: function words, interjections, filler verbs."""

_CAPITALISED = re.compile(r"[A-Z][A-Za-z'\-]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*|[^A-Za-z\s]+")


# ---------------------------------------------------------------- the simple dimensions


def is_question(text: str) -> bool:
    """A turn raises a question when it contains a question mark (ChatMatch's test)."""
    return "?" in text


def questions(texts: Sequence[str]) -> list[int]:
    """Proactivity: 1 for every turn that raises a question, else 0."""
    return [int(is_question(t)) for t in texts]


def specificity(texts: Sequence[str]) -> list[float]:
    """Specificity of each turn: the mean of its distinct-1 and distinct-2 (Li et al. 2016, whom
    ChatMatch cites: distinct n-grams over the turn's tokens)."""
    return [(distinct_n([text], 1) + distinct_n([text], 2)) / 2 for text in texts]


def entities(text: str) -> list[str]:
    """The entity heuristic: runs of capitalised words, less "I", stopwords and interjections."""
    found, run = [], []
    for word in _WORD.findall(text) + ["."]:
        keep = (
            _CAPITALISED.fullmatch(word) is not None
            and word != "I"
            and word.lower().split("'")[0] not in STOPWORDS
            and word.lower() not in STOPWORDS
        )
        if keep:
            run.append(word.removesuffix("'s"))
        elif run:
            found.append(" ".join(run))
            run = []
    return found


def new_entities(texts: Sequence[str]) -> list[int]:
    """Knowledge: how many entities each turn mentions for the first time in the conversation.

    As ChatMatch counts them, an entity belongs to whoever names it first; naming it again
    (either speaker) earns nothing.
    """
    seen: set[str] = set()
    counts = []
    for text in texts:
        fresh = {e.lower() for e in entities(text)} - seen
        seen |= fresh
        counts.append(len(fresh))
    return counts


def fluency(texts: Sequence[str], perplexity: Callable[[list[str]], list[float]], cap: float) -> list[float]:
    """Fluency of each turn: its perplexity under a local language model, capped at ``cap``.

    ChatMatch capped perplexity (at 50, under a character-level LM) so that one garbled turn does
    not outweigh the rest; an empty turn gets the cap.
    """
    scored = [i for i, t in enumerate(texts) if t.strip()]
    values = perplexity([texts[i] for i in scored]) if scored else []
    out = [float(cap)] * len(texts)
    for i, value in zip(scored, values):
        out[i] = min(float(cap), float(value))
    return out


# ---------------------------------------------------------------- ChatMatch Algorithms 1-3


def repetitions(
    texts: Sequence[str], speakers: Sequence[int], similarity: np.ndarray, threshold: float = 0.95
) -> tuple[list[int], list[list[int]]]:
    """Diversity, ChatMatch Algorithm 1: the repetition penalty of each turn.

    Turn i repeats an earlier turn j of the same speaker when ``similarity[i, j] >= threshold``.
    A repeated question (both turns questions) is penalised. Any other repetition is penalised too,
    except an answer to a question the other bot has just repeated that says again what it said
    the first time (it repeats the earlier answer ``j + 1``): a repeated question deserves the same
    answer, so only the asker is penalised, once. An empty turn is penalised as in ChatMatch's code.

    Returns the penalties (0/1 per turn) and, per turn, the earlier turns it repeats as a
    question (Algorithm 2 reads these).
    """
    n = len(texts)
    penalty = [0] * n
    repeated_questions: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        if not texts[i].strip():
            penalty[i] = 1
            continue
        repeats = [j for j in range(i) if speakers[j] == speakers[i] and similarity[i, j] >= threshold]
        if not repeats:
            continue
        asked_again = [j for j in repeats if is_question(texts[j]) and is_question(texts[i])]
        if asked_again:
            repeated_questions[i] = asked_again
            penalty[i] = 1
            continue
        previous = repeated_questions[i - 1] if i > 0 else []
        same_answer = any(j + 1 < i and similarity[i, j + 1] >= threshold for j in previous)
        if not same_answer:
            penalty[i] = 1
    return penalty, repeated_questions


def contradictions(
    speakers: Sequence[int], similarity: np.ndarray, repeated_questions: Sequence[Sequence[int]], threshold: float = 0.8
) -> list[int]:
    """Consistency, ChatMatch Algorithm 2: the contradiction penalty of each turn.

    When the other bot has just repeated a question (turn i − 1 repeats turn j, per Algorithm 1),
    the answer now (turn i) is compared with the answer given the first time (turn j + 1): less
    similar than ``threshold`` is an inconsistent answer, penalised once however many earlier
    answers it departs from.
    """
    n = len(speakers)
    penalty = [0] * n
    for i in range(1, n):
        earlier = [j + 1 for j in repeated_questions[i - 1] if j + 1 < i and speakers[j + 1] == speakers[i]]
        if any(similarity[i, k] < threshold for k in earlier):
            penalty[i] = 1
    return penalty


def concepts(text: str) -> list[str]:
    """The concepts of a turn, in order: stemmed alphabetic non-stopword tokens of 3+ letters."""
    return [stem(t) for t in tokens(text) if t.isalpha() and len(t) >= 3 and t not in STOPWORDS]


def rare_concepts(texts: Sequence[str], share: float = 0.5) -> set[str]:
    """The conversation's rare concepts: the first ``share`` of its concepts ranked by IDF.

    IDF is computed over the conversation's turns (each turn a document), as in ChatMatch; ties
    keep the order of first appearance, so the ranking is deterministic. A concept is rare when its
    place in that ranking (0-based) is below ``share`` × the number of concepts.
    """
    docs = [concepts(t) for t in texts]
    weights = idf(docs)
    order = list(dict.fromkeys(c for doc in docs for c in doc))  # first appearance
    ranked = sorted(order, key=lambda c: -weights[c])  # stable: ties stay in order of appearance
    return {c for rank, c in enumerate(ranked) if rank < share * len(ranked)}


def relevance(texts: Sequence[str], share: float = 0.5, min_gap: int = 2) -> list[int]:
    """Relevance, ChatMatch Algorithm 3: the IDF concept bonus of each turn.

    A turn earns a bonus (1) when it brings back a rare concept (:func:`rare_concepts`) last
    mentioned at least ``min_gap`` turns earlier: returning to an earlier topic, not echoing the
    line just heard (ChatMatch's ``i − last > 1``). One bonus per turn at most.
    """
    rare = rare_concepts(texts, share)
    last: dict[str, int] = {}
    bonus = [0] * len(texts)
    for i, text in enumerate(texts):
        for concept in concepts(text):
            if concept not in rare:
                continue
            if concept in last and i - last[concept] >= min_gap:
                bonus[i] = 1
            last[concept] = i
    return bonus


@dataclass(frozen=True)
class TurnScores:
    """Every per-turn score of one conversation, one list entry per turn."""

    fluency: list[float]
    knowledge: list[int]
    proactivity: list[int]
    specificity: list[float]
    repetition: list[int]
    contradiction: list[int]
    relevance: list[int]


def score_turns(
    texts: Sequence[str],
    speakers: Sequence[int],
    fluency_values: Sequence[float],
    *,
    repetition_threshold: float = 0.95,
    consistency_threshold: float = 0.8,
    concept_share: float = 0.5,
    concept_gap: int = 2,
) -> TurnScores:
    """All seven scores of every turn; ``fluency_values`` come from :func:`fluency` (the slow part)."""
    similarity = tfidf_cosine(texts)
    repeat, asked_again = repetitions(texts, speakers, similarity, repetition_threshold)
    return TurnScores(
        fluency=list(fluency_values),
        knowledge=new_entities(texts),
        proactivity=questions(texts),
        specificity=specificity(texts),
        repetition=repeat,
        contradiction=contradictions(speakers, similarity, asked_again, consistency_threshold),
        relevance=relevance(texts, concept_share, concept_gap),
    )
