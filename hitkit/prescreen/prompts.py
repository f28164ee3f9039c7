"""ChatEval's prompts in the pre-screen: read the prompts with their reference responses, ask the bots
for the responses a file lacks, and score them (distinct-n, embedding cosine, BLEU-2, perplexity)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.errors import ConfigError
from hitkit.material.generation import Reply
from hitkit.prescreen import chateval

PerplexityFn = Callable[..., list[float]]
EmbedFn = Callable[[list[str]], np.ndarray]


def read_prompts(path: Path) -> list[dict]:
    """The prompts file: JSONL ``{"id", "prompt", "responses"?: {system: text}, "reference"?}``."""
    if not path.is_file():
        raise ConfigError(f"prescreen.prompts: {path} does not exist")
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: not JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
            raise ConfigError(f"{path}:{n}: each line needs a string 'prompt' (and 'reference', 'responses')")
        items.append(
            {
                "id": str(obj.get("id", n)),
                "prompt": obj["prompt"],
                "responses": dict(obj.get("responses") or {}),
                "reference": obj.get("reference"),
            }
        )
    return items


def chateval_responses(
    items: Sequence[dict],
    systems: Sequence[str],
    bots: Mapping[str, Reply] | None,
    *,
    parallel: int = 4,
    show_progress: bool = True,
) -> dict[str, list[str]]:
    """Each system's response to every prompt: from the file where given, else asked of its bot."""
    from tqdm import tqdm

    missing = [(s, i) for s in systems for i, item in enumerate(items) if s not in item["responses"]]
    asked: dict[tuple[str, int], str] = {}
    if missing:
        if bots is None or any(s not in bots for s, _ in missing):
            lacking = sorted({s for s, _ in missing if bots is None or s not in bots})
            raise ConfigError(
                f"prescreen.prompts has no responses for {', '.join(lacking)} and hitkit cannot "
                f"ask those bots; add their responses to the file or give them 'url' and 'model'"
            )
        with ThreadPoolExecutor(parallel) as pool:
            futures = {
                pool.submit(bots[s], [{"role": "user", "content": items[i]["prompt"]}]): (s, i) for s, i in missing
            }
            for future in tqdm(
                as_completed(futures),
                total=len(futures),
                desc="ChatEval responses",
                unit="reply",
                disable=not show_progress,
            ):
                asked[futures[future]] = future.result().strip()
    return {s: [item["responses"].get(s, asked.get((s, i), "")) for i, item in enumerate(items)] for s in systems}


def chateval_table(
    items: Sequence[dict], responses: Mapping[str, list[str]], *, embed: EmbedFn | None, perplexity: PerplexityFn | None
) -> pd.DataFrame:
    """One row per system: ChatEval's metrics (:func:`hitkit.prescreen.chateval.system_metrics`)."""
    prompts = [item["prompt"] for item in items]
    references = [item["reference"] for item in items]
    rows = [
        {"system": s, **chateval.system_metrics(prompts, texts, references, embed=embed, perplexity=perplexity)}
        for s, texts in responses.items()
    ]
    return pd.DataFrame(rows)
