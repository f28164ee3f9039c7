"""The arena's quality control as data: which battles are QC battles, and identity leaks.

QC battles pit a real system against the degraded QC bot (:mod:`hitkit.bots.degraded`); a worker whose
votes in them do not prefer the real system fails QC (the test itself is ``worker_qc`` of the arena's
analysis, over ``battles.csv``). A battle *leaks* when either side's reply names a model or a vendor: the
worker may then have voted for a name, not a reply. FastChat drops such battles from its leaderboard
the same way (its ``clean_battle_data.py`` keeps a list of identity words); hitkit flags them
(``battles.csv``'s ``leak``) and the analysis leaves them out by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

DEFAULT_LEAK_WORDS = (
    "gpt",
    "chatgpt",
    "openai",
    "claude",
    "anthropic",
    "gemini",
    "bard",
    "palm",
    "google",
    "deepmind",
    "llama",
    "meta ai",
    "mistral",
    "mixtral",
    "qwen",
    "alibaba",
    "deepseek",
    "vicuna",
    "lmsys",
    "yi-",
    "01.ai",
    "phi-",
    "microsoft",
    "copilot",
    "grok",
    "xai",
    "cohere",
    "command-r",
    "smollm",
    "hugging face",
    "huggingface",
    "falcon",
    "gemma",
    "olmo",
    "allenai",
)
"""Words that name a model or its maker (lower case; matched as whole words, ``-`` and ``.`` kept)."""


def leak_pattern(words: Sequence[str]) -> re.Pattern[str]:
    """One case-insensitive pattern that finds any of ``words`` as a whole word (a prefix ending in ``-``
    such as ``yi-`` matches the start of a hyphenated name)."""
    parts = []
    for word in words:
        escaped = re.escape(word.strip().lower())
        parts.append(escaped if word.endswith("-") else escaped + r"(?![\w])")
    return re.compile(r"(?<![\w])(?:" + "|".join(parts) + ")", re.IGNORECASE)


def leaks(replies: Iterable[str], pattern: re.Pattern[str]) -> bool:
    """Whether any reply names a model or vendor."""
    return any(pattern.search(reply) for reply in replies)
