"""How sure the judge was of a label, read from its reply's token log-probabilities (``judge.confidence``).

A judge whose server returns log-probabilities (OpenAI's ``logprobs.content``: hitkit's bot server, vLLM,
OpenAI) gives, at the token where its label begins, a distribution over the alternatives it weighed.
:func:`label_probabilities` reads it, for protocols whose judge module lists its labels (``LABELS``;
pairwise: a, b, tie), exactly so:

1. A token *names* a label when its text, lower-cased and stripped of whitespace and of the marks
   ``"'*_([`` around it, is not empty and starts the label (``A`` and `` a`` name a; ``t``, ``ti`` and
   ``tie`` name tie).
2. The label's step is the first reply token that names the label the reply was read as (the parsed
   label); a reply with no such token gives no confidence.
3. At that step, each label's mass is the sum of exp(logprob) over the distinct tokens that name it among
   the step's ``top_logprobs`` and the chosen token itself; the masses are normalised to sum to 1.

The stored confidence (``judge_label.meta["confidence"]``) is the chosen label's normalised mass, in
[0, 1]; ``meta["label_probs"]`` keeps every label's. Labels the top alternatives miss count as 0, so
ask for more alternatives than there are labels (:data:`TOP_LOGPROBS`). Without log-probabilities (a
server that gives none, ``judge.confidence: agreement``) nothing is stored, and the crowd's second wave
reads the judge's agreement across display orders instead (:func:`hitkit.analysis.ppi_active.agreement_confidence`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

TOP_LOGPROBS = 10
"""Alternatives asked for per reply token when the judge's confidence is read from logprobs."""
_MARKS = "\"'*_([ \t\n\r"


def names(token: str, label: str) -> bool:
    """Whether ``token`` (a reply token's text) begins ``label`` (rule 1 of the module docstring)."""
    text = token.strip(_MARKS).lower()
    return bool(text) and label.lower().startswith(text)


def label_probabilities(
    entries: Sequence[Mapping[str, Any]], chosen: str, labels: Sequence[str]
) -> dict[str, float] | None:
    """Every label's normalised probability at the step where ``chosen`` begins (module docstring), from
    OpenAI ``logprobs.content`` ``entries``; None when no reply token names ``chosen`` or no mass is found."""
    for entry in entries:
        token = str(entry.get("token", ""))
        if not names(token, chosen):
            continue
        alternatives = {token: float(entry["logprob"])}
        for alt in entry.get("top_logprobs") or ():
            alternatives.setdefault(str(alt["token"]), float(alt["logprob"]))
        mass = {
            label: sum(math.exp(lp) for t, lp in alternatives.items() if names(t, label) and _first(t, labels) == label)
            for label in labels
        }
        total = sum(mass.values())
        if total <= 0:
            return None
        return {label: m / total for label, m in mass.items()}
    return None


def _first(token: str, labels: Sequence[str]) -> str | None:
    """The one label a token counts for: the first of ``labels`` it names (no token counts twice)."""
    return next((label for label in labels if names(token, label)), None)


def label_confidence(
    entries: Sequence[Mapping[str, Any]] | None, chosen: str | None, labels: Sequence[str] | None
) -> dict[str, Any]:
    """What is stored in a label's meta: ``confidence`` and ``label_probs`` where the logprobs give them,
    else nothing (an empty dict)."""
    if not entries or chosen is None or not labels:
        return {}
    probs = label_probabilities(entries, chosen, labels)
    if probs is None:
        return {}
    return {"confidence": round(probs[chosen], 6), "label_probs": {k: round(v, 6) for k, v in probs.items()}}
