"""Drawing the next token of every row of a batch at once, each row with its own temperature and
top-p (:mod:`hitkit.bots.engine` runs one batch of chats with different sampling settings), and a row
that sent a seed from its own generator.
"""

from __future__ import annotations

import torch


def sample_next(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    generator: torch.Generator | None,
    row_generators: list[torch.Generator | None] | None = None,
) -> torch.Tensor:
    """Draw one token per row: argmax where temperature is 0, else nucleus sampling per row.

    A row with its own generator in ``row_generators`` (a request that sent a seed) draws from it,
    so its reply does not depend on which other chats share the batch.
    """
    greedy = logits.argmax(dim=-1)
    sampled_rows = temperature > 0
    if not bool(sampled_rows.any()):
        return greedy
    probs = torch.softmax(logits.float() / temperature.clamp_min(1e-5).unsqueeze(1), dim=-1)
    if bool((top_p < 1).any()):
        sorted_p, order = probs.sort(dim=-1, descending=True)
        # Drop a token once the mass before it already reaches top_p; the top token always stays.
        drop = (sorted_p.cumsum(dim=-1) - sorted_p) >= top_p.unsqueeze(1)
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    sampled = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    for row, own in enumerate(row_generators or ()):
        if own is not None and bool(sampled_rows[row]):
            sampled[row] = torch.multinomial(probs[row], 1, generator=own)[0]
    return torch.where(sampled_rows, sampled, greedy)
