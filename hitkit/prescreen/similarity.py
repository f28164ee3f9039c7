"""Tokens, a light stemmer and tf-idf cosine similarity: the similarity function of ChatMatch.

ChatMatch (Yang et al., ACL 2022) compares utterances by the cosine of their tf-idf vectors, the
vectors fitted on the turns of one conversation (each turn a document), with Porter-stemmed
tokens. This module does the same without scikit-learn or NLTK: a lower-cased word tokenizer, a
small suffix-stripping stemmer (plurals, ``-ing``, ``-ed``: enough to match "cats"/"cat" and
"played"/"playing"/"play", not a full Porter stemmer), and scikit-learn's default tf-idf weighting
(raw counts × smoothed idf ``ln((1 + n) / (1 + df)) + 1``, rows L2-normalised).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation dropped, contractions kept whole ("don't")."""
    return _TOKEN.findall(text.lower())


def distinct_n(texts: Sequence[str], n: int) -> float:
    """distinct-n of Li et al. (2016), as ChatEval computes it: the number of distinct n-grams of
    all ``texts`` together divided by the total number of their tokens (not by the number of
    n-grams, which makes distinct-2 larger); 0 without tokens.

    Each text is tokenised apart (:func:`tokens`), so an n-gram never spans two texts. The one
    definition behind the ChatEval metrics (a system's responses), ChatMatch's specificity (one
    turn) and the dashboard's system profile (a system's turns).
    """
    grams: set = set()
    total_tokens = 0
    for text in texts:
        words = tokens(text)
        total_tokens += len(words)
        grams.update(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return len(grams) / total_tokens if total_tokens else 0.0


def stem(token: str) -> str:
    """A light English stemmer: strips a possessive, plural ``-s``/``-es``/``-ies``, ``-ing`` and ``-ed``."""
    t = token.removesuffix("'s")
    if len(t) > 4 and t.endswith("ies"):
        return t[:-3] + "y"
    if len(t) > 4 and t.endswith(("sses", "shes", "ches", "xes", "zes")):
        return t[:-2]
    if len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is")):
        return t[:-1]
    for suffix in ("ing", "ed"):
        if len(t) > len(suffix) + 3 and t.endswith(suffix):
            t = t[: -len(suffix)]
            if len(t) > 2 and t[-1] == t[-2] and t[-1] not in "lsz":  # "stopped" → "stop"
                t = t[:-1]
            return t
    return t


def stemmed(text: str) -> list[str]:
    """The text's tokens, stemmed: what tf-idf and the concept lists count."""
    return [stem(t) for t in tokens(text)]


def tfidf_matrix(documents: Sequence[str]) -> np.ndarray:
    """Row-normalised tf-idf vectors of ``documents``, idf fitted on ``documents`` themselves.

    Weighting as scikit-learn's ``TfidfVectorizer`` defaults: raw term counts times
    ``ln((1 + n) / (1 + df)) + 1``; every row L2-normalised; an empty document is a zero row.
    """
    counts = [Counter(stemmed(d)) for d in documents]
    vocabulary = sorted(set().union(*counts)) if counts else []
    index = {term: j for j, term in enumerate(vocabulary)}
    matrix = np.zeros((len(documents), len(vocabulary)))
    for i, count in enumerate(counts):
        for term, c in count.items():
            matrix[i, index[term]] = c
    n = len(documents)
    df = (matrix > 0).sum(axis=0)
    matrix *= np.log((1 + n) / (1 + df)) + 1
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def tfidf_cosine(documents: Sequence[str]) -> np.ndarray:
    """The ``[n, n]`` matrix of tf-idf cosine similarities between ``documents`` (0 for an empty one)."""
    vectors = tfidf_matrix(documents)
    return vectors @ vectors.T


def idf(documents: Sequence[Sequence[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency ``ln(n / (1 + df)) + 1`` of every term in tokenised ``documents``."""
    n = len(documents)
    df = Counter(term for doc in documents for term in set(doc))
    return {term: math.log(n / (1 + d)) + 1 for term, d in df.items()}
