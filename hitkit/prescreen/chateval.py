"""ChatEval's automatic metrics (Sedoc et al., NAACL 2019 demo) on prompts and each system's responses.

For one system's responses to a set of prompts, each with a human reference response:

- distinct-1 and distinct-2 (Li et al. 2016; ChatEval): the number of distinct n-grams of all
  the system's responses together (corpus level) divided by the total number of generated
  tokens, on lower-cased word tokens (METHODS §3; not by the number of n-grams, which for
  distinct-2 gives a larger figure: 0.283 where the paper's definition gives 0.246):
  :func:`hitkit.prescreen.similarity.distinct_n`;
- embedding cosine: the mean cosine between each response's sentence embedding and its
  reference's (all-MiniLM-L6-v2 by default, see :mod:`hitkit.prescreen.models`);
- sentence BLEU-2 (Papineni et al. 2002 at the sentence level): geometric mean of the clipped
  unigram and bigram precisions times the brevity penalty, smoothed as Chen & Cherry (2014)
  method 1: a zero bigram precision becomes ε / (bigram count), ε = 0.1; the mean over prompts;
- perplexity of the response given its prompt under a local language model, the mean over prompts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from hitkit.prescreen.similarity import distinct_n, tokens

SMOOTHING_EPSILON = 0.1


def _ngrams(words: Sequence[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def sentence_bleu2(hypothesis: str, reference: str, epsilon: float = SMOOTHING_EPSILON) -> float:
    """Sentence-level BLEU-2 of ``hypothesis`` against one ``reference``, smoothed (method 1).

    BLEU-2 = BP · exp(½ ln p₁ + ½ ln p₂), pₙ the clipped n-gram precision, BP = 1 if the
    hypothesis is longer than the reference, else exp(1 − r/c). A zero precision with a non-zero
    denominator becomes ``epsilon`` / denominator; no matching unigram at all scores 0, as does an
    empty hypothesis, and a one-word hypothesis (no bigram) is scored on unigrams alone.
    """
    hyp, ref = tokens(hypothesis), tokens(reference)
    if not hyp or not ref:
        return 0.0
    logs = []
    for n in (1, 2):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        total = sum(h.values())
        if total == 0:
            continue
        matched = sum(min(c, r[g]) for g, c in h.items())
        if matched == 0 and n == 1:
            return 0.0
        logs.append(math.log((matched if matched else epsilon) / total))
    c, r_len = len(hyp), len(ref)
    brevity = 1.0 if c > r_len else math.exp(1 - r_len / c)
    return brevity * math.exp(sum(logs) / len(logs))


def mean_cosine(responses: Sequence[str], references: Sequence[str], embed: Callable[[list[str]], np.ndarray]) -> float:
    """The mean cosine similarity between each response's embedding and its reference's."""
    if not responses:
        return float("nan")
    a, b = embed(list(responses)), embed(list(references))
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return float(np.mean(np.sum(a * b, axis=1)))


def system_metrics(
    prompts: Sequence[str],
    responses: Sequence[str],
    references: Sequence[str | None],
    *,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    perplexity: Callable[[list[str], list[str]], list[float]] | None = None,
) -> dict[str, float]:
    """One system's ChatEval metrics; ``references[i]`` None leaves prompt i out of the reference metrics.

    ``embed`` (texts → [n, d] array) and ``perplexity`` (texts, contexts → values) are optional:
    without one, its metric is NaN.
    """
    referenced = [(i, r) for i, r in enumerate(references) if r]
    with_ref = [i for i, _ in referenced]
    metrics = {
        "responses": len(responses),
        "with_reference": len(with_ref),
        "distinct_1": distinct_n(responses, 1),
        "distinct_2": distinct_n(responses, 2),
        "bleu_2": float(np.mean([sentence_bleu2(responses[i], r) for i, r in referenced]))
        if with_ref
        else float("nan"),
        "embedding_cosine": float("nan"),
        "perplexity": float("nan"),
    }
    if embed is not None and with_ref:
        metrics["embedding_cosine"] = mean_cosine([responses[i] for i in with_ref], [r for _, r in referenced], embed)
    scored = [i for i, r in enumerate(responses) if r.strip()]
    if perplexity is not None and scored:
        values = perplexity([responses[i] for i in scored], [prompts[i] for i in scored])
        metrics["perplexity"] = float(np.mean(values))
    return metrics
