"""Token log-probabilities of a reply, in the shape of OpenAI's chat completions.

With ``logprobs: true`` a reply's ``choices[0].logprobs`` is ``{"content": [entry, …]}``, one entry per
generated token: ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, …]}``
(the ``top_logprobs`` most likely tokens at that step, most likely first; ``bytes`` the UTF-8 bytes of
``token``), as OpenAI documents the chat completion object
(https://developers.openai.com/api/reference/python/resources/chat/subresources/completions/,
``ChoiceLogprobs`` / ``ChatCompletionTokenLogprob``).

What hitkit's engines guarantee: ``logprob`` is the model's own log-probability of the token, the log
softmax of the step's logits at temperature 1 and before top-p — whatever temperature and top-p the
token was drawn with — so a judge's confidence does not depend on how it was sampled. Every token the
engine generated is listed, the end-of-turn token excepted (as OpenAI does); a reply cut at a stop
sequence lists the tokens up to the one that completed it. A token's text is the tokenizer's decoding
of that token alone (a token that holds part of a multi-byte character decodes to U+FFFD, or to nothing
with llama.cpp). Engines: transformers (:mod:`hitkit.bots.engine`) and llama.cpp (:mod:`hitkit.bots.llamacpp`,
which copies the step's logits row from ``llama_get_logits_ith``); the degraded QC bot has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - the llama.cpp engine uses this module without torch
    import torch


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability and the ``top`` alternatives at its step: (token id, logprob)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]


def step_logprobs(logits: torch.Tensor, chosen: torch.Tensor, wants: Sequence[int | None]) -> list[TokenLogprob | None]:
    """For each row of a decode step (``logits``: rows × vocabulary; ``chosen``: the token drawn per row),
    the drawn token's log softmax and the ``wants[row]`` most likely tokens; None for rows whose request
    asked for no logprobs (``wants[row]`` None). Only the rows that asked are computed."""
    import torch

    rows = [r for r, k in enumerate(wants) if k is not None]
    out: list[TokenLogprob | None] = [None] * len(wants)
    if not rows:
        return out
    index = torch.tensor(rows, device=logits.device)
    lp = torch.log_softmax(logits.index_select(0, index).float(), dim=-1)
    picked = lp.gather(1, chosen.index_select(0, index).unsqueeze(1)).squeeze(1).tolist()
    k = max(int(wants[r] or 0) for r in rows)
    values, ids = lp.topk(min(k, lp.shape[1]), dim=-1) if k else (lp[:, :0], lp[:, :0].long())
    values_l, ids_l = values.tolist(), ids.tolist()
    for i, r in enumerate(rows):
        n = int(wants[r] or 0)
        top = tuple((int(t), float(v)) for t, v in zip(ids_l[i][:n], values_l[i][:n]))
        out[r] = TokenLogprob(int(chosen[r]), float(picked[i]), top)
    return out


def row_logprobs(logits: np.ndarray, chosen: int, k: int) -> TokenLogprob:
    """One step's logprobs from one row of logits (a vector over the vocabulary), as :func:`step_logprobs`."""
    x = np.asarray(logits, dtype=np.float64)
    top_x = x.max()
    lp = x - (top_x + np.log(np.exp(x - top_x).sum()))
    best = np.argpartition(-lp, k - 1)[:k] if k else np.zeros(0, dtype=int)
    best = best[np.argsort(-lp[best], kind="stable")]
    return TokenLogprob(int(chosen), float(lp[chosen]), tuple((int(i), float(lp[i])) for i in best))


def _entry(token: int, logprob: float, text: Callable[[int], str]) -> dict[str, Any]:
    piece = text(token)
    return {"token": piece, "logprob": logprob, "bytes": list(piece.encode("utf-8"))}


def content(tokens: Sequence[TokenLogprob], text: Callable[[int], str]) -> tuple[dict[str, Any], ...]:
    """OpenAI's ``logprobs.content`` list for a reply's tokens; ``text`` decodes one token id."""
    return tuple(
        {**_entry(t.token, t.logprob, text), "top_logprobs": [_entry(i, v, text) for i, v in t.top]} for t in tokens
    )
