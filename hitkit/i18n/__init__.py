"""Worker-facing words in the worker's language (``ui_language:`` in the study file).

The library marks every string a worker may read with :func:`N_`: it stays English wherever hitkit
uses it (logs, the coordinator's tools, tests), and keeps its message id and values so that the web
tier can put it into the study's language at the edge (:func:`localise`). ``pybabel extract``
(``babel.cfg``) finds the marks; the catalogs are ``hit_templates/translations/`` (:mod:`.catalogs`).
Text the study supplies (material, prompts, topics, its own criteria) is never marked, so it stays as
written: :func:`localise` translates only what hitkit itself wrote.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Protocol


class Message(str):
    """A worker-facing sentence: English as a str, with its message id and values kept for translation."""

    msgid: str
    params: dict[str, Any]

    def __new__(cls, msgid: str, params: dict[str, Any] | None = None) -> Message:
        params = dict(params or {})
        shown = {key: _english(value) for key, value in params.items()}
        text = super().__new__(cls, msgid % shown if params else msgid)
        text.msgid = msgid
        text.params = params
        return text

    def __reduce__(self):  # pickled (multiprocessing, caches) as what it is
        return (Message, (self.msgid, self.params))


def _english(value: Any) -> Any:
    """A value as the English sentence shows it: a duration in words ("30 minutes"), the rest as it is."""
    if isinstance(value, dt.timedelta):
        from babel.dates import format_timedelta

        return format_timedelta(value, locale="en", threshold=1.0)
    return value


def N_(msgid: str, **params: Any) -> Message:
    """Mark ``msgid`` (a ``%(name)s`` format string) as worker-facing; ``params`` fill it in."""
    return Message(msgid, params)


class Translator(Protocol):
    """What :func:`localise` needs of a language: its catalog and its number formats."""

    def gettext(self, message: str) -> str: ...

    def number(self, value: float | int | Decimal) -> str: ...

    def duration(self, value: dt.timedelta) -> str: ...


def translate(message: Message, words: Translator) -> str:
    """``message`` in the translator's language, its numbers and durations formatted for the language."""
    text = words.gettext(message.msgid)
    if not message.params:
        return text
    values = {key: _formatted(value, words) for key, value in message.params.items()}
    try:
        return text % values
    except (KeyError, ValueError, TypeError):
        # A coordinator's own catalog with a broken placeholder: the English sentence, never a 500.
        return message.msgid % values


def _formatted(value: Any, words: Translator) -> Any:
    if isinstance(value, Message):
        return translate(value, words)
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, dt.timedelta)):
        return value
    if isinstance(value, dt.timedelta):
        return words.duration(value)
    return words.number(value)


def localise(value: Any, words: Translator) -> Any:
    """``value`` (a page's data: dicts, lists, strings) with every :class:`Message` in it translated."""
    if isinstance(value, Message):
        return translate(value, words)
    if isinstance(value, dict):
        return {key: localise(item, words) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [localise(item, words) for item in value]
    return value


_DEFAULTS: dict[str, Message] = {}


def default_text(msgid: str) -> Message:
    """Mark a default the study file may replace (a criterion's statement, the pairwise question): kept as
    hitkit's own, so :func:`own` finds it again after the study file's round trip through the database."""
    message = Message(msgid)
    _DEFAULTS[msgid] = message
    return message


def own(text: str) -> str:
    """``text`` as hitkit's marked default when it is one word for word (translated on the page), else
    unchanged: the study's own wording stays as written."""
    return _DEFAULTS.get(text, text)
