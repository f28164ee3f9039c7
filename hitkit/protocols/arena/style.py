"""The style of a reply, counted as FastChat counts it for style control (``STYLE_CONTROL_ELEMENTS_V1``).

FastChat's arena (``fastchat/serve/monitor/clean_battle_data.py``) counts, over all assistant turns of a
side: the reply's tokens (``sum_assistant_*_tokens``), markdown headers (lines starting with one to six
``#`` and a space), list items (ordered ``1. `` and unordered ``-``/``*``/``+`` items, indented or not)
and bold spans (``**…**`` and ``__…__`` within a line), after removing fenced code blocks (whose
``#`` and ``*`` are code, not style). We count the same elements with the same patterns.

One difference, on purpose: FastChat counts tokens with tiktoken (GPT-4's ``cl100k_base``), which hitkit
does not depend on. :func:`count_tokens` counts words and punctuation marks instead (the pattern
``\\w+|[^\\w\\s]``: a run of letters and digits, or one other visible character). Style control uses the
*normalised difference* of the two sides' counts, so a tokenizer that scales with tiktoken's (about
0.75 of its count on English prose) changes the length coefficient's scale, not its sign or the
ratings it controls for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TOKEN = re.compile(r"\w+|[^\w\s]")
CODE_BLOCK = re.compile(r"```[^`]*```")
HEADERS = tuple(re.compile(rf"^#{{{n}}}\s", re.MULTILINE) for n in range(1, 7))
ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
BOLD = (re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__"))


@dataclass(frozen=True)
class Style:
    """One side's style over its assistant turns."""

    tokens: int
    header_count: int
    list_count: int
    bold_count: int


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by hitkit's documented rule (module docstring): words and punctuation marks."""
    return len(TOKEN.findall(text))


def markdown_counts(text: str) -> tuple[int, int, int]:
    """(headers, list items, bold spans) of ``text``, fenced code blocks removed first."""
    text = CODE_BLOCK.sub("", text)
    headers = sum(len(p.findall(text)) for p in HEADERS)
    lists = len(ORDERED.findall(text)) + len(UNORDERED.findall(text))
    bold = sum(len(p.findall(text)) for p in BOLD)
    return headers, lists, bold


def style_of(replies: Iterable[str]) -> Style:
    """The style of one side: each count summed over its assistant turns ``replies``."""
    tokens = headers = lists = bold = 0
    for reply in replies:
        tokens += count_tokens(reply)
        h, li, b = markdown_counts(reply)
        headers, lists, bold = headers + h, lists + li, bold + b
    return Style(tokens, headers, lists, bold)
