"""Reshaping a running batch's key/value cache as chats join and leave it.

A Hugging Face ``DynamicCache`` stores, per layer, keys and values shaped
``[batch, kv_heads, time, head_dim]``. Rows are left-padded so that every sequence's newest token
sits in the last column; padded columns are masked out by the 2-D attention mask. Joining pads the
shorter side on the left; leaving selects rows and drops the leading columns no remaining row uses,
so attention cost tracks the longest live chat, not the longest chat ever seen.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache


def cache_tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return each layer's (keys, values)."""
    layers: list[Any] = list(cache.layers)  # DynamicLayer: .keys/.values [batch, heads, time, dim]
    return [(layer.keys, layer.values) for layer in layers]


def _pad_left(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    extra = width - t.shape[dim]
    if extra == 0:
        return t
    shape = list(t.shape)
    shape[dim] = extra
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def join(
    cache_a: DynamicCache, mask_a: torch.Tensor, cache_b: DynamicCache, mask_b: torch.Tensor
) -> tuple[DynamicCache, torch.Tensor]:
    """Stack two batches (a's rows first), left-padding the shorter one in time."""
    width = max(mask_a.shape[1], mask_b.shape[1])
    layers = []
    for (ka, va), (kb, vb) in zip(cache_tensors(cache_a), cache_tensors(cache_b), strict=True):
        layers.append(
            (
                torch.cat([_pad_left(ka, width, 2), _pad_left(kb, width, 2)], dim=0),
                torch.cat([_pad_left(va, width, 2), _pad_left(vb, width, 2)], dim=0),
            )
        )
    mask = torch.cat([_pad_left(mask_a, width, 1), _pad_left(mask_b, width, 1)], dim=0)
    return DynamicCache(layers), mask


def keep_rows(cache: DynamicCache, mask: torch.Tensor, rows: torch.Tensor) -> tuple[DynamicCache, torch.Tensor]:
    """Keep only ``rows`` and drop leading time columns that none of them attends to."""
    mask = mask.index_select(0, rows)
    used = mask.any(dim=0)
    start = int(used.int().argmax()) if bool(used.any()) else mask.shape[1]
    layers = [
        (k.index_select(0, rows)[:, :, start:], v.index_select(0, rows)[:, :, start:]) for k, v in cache_tensors(cache)
    ]
    return DynamicCache(layers), mask[:, start:]
