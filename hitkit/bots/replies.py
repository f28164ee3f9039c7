"""Reading an OpenAI chat-completions response (:mod:`hitkit.bots.client`'s side of the wire): a whole
reply's text and token log-probabilities, a streamed reply's text, an error's message and a retry hint."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import requests


class PastDeadline(Exception):
    """A stream still going when the reply's whole time budget is spent."""


def streamed_text(
    response: requests.Response, on_text: Callable[[str], None], deadline: float | None = None
) -> tuple[str | None, str]:
    """Read a streamed reply, announcing the text so far; (text, "") when whole, (None, why) when not.

    A bot that did not stream (a JSON body) gives its reply as one piece. ``deadline`` (monotonic
    seconds): :class:`PastDeadline` if the stream is still going then — a bot that keeps the
    connection alive with comments but sends no text would otherwise hold the caller for ever.
    """
    if not response.headers.get("Content-Type", "").startswith("text/event-stream"):
        text = reply_text(response)
        if text is None:
            return None, "the server answered 200 without choices[0].message.content"
        on_text(text)
        return text, ""
    pieces: list[str] = []
    on_text("")  # a retry starts the text again
    for line in response.iter_lines():
        if deadline is not None and time.monotonic() > deadline:
            raise PastDeadline()
        if not line.startswith(b"data:"):
            continue  # comments, event names, blank separators
        data = line[5:].strip()
        if data == b"[DONE]":
            return "".join(pieces), ""
        try:
            event = json.loads(data)
        except ValueError:
            return None, f"the stream sent an event that is not JSON: {data[:80]!r}"
        if isinstance(event, dict) and "error" in event:
            error = event["error"]
            return None, f"the bot failed mid-stream: {error.get('message') if isinstance(error, dict) else error}"
        try:
            piece = event["choices"][0].get("delta", {}).get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            return None, "a stream event had no choices[0].delta"
        if piece:
            pieces.append(piece)
            on_text("".join(pieces))
    return None, "the stream ended before data: [DONE]"


def reply_text(response: requests.Response) -> str | None:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def error_message(response: requests.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)
    except (ValueError, AttributeError):
        pass
    return response.text[:200] or response.reason or "no message"


def retry_after(response: requests.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", 0)))
    except ValueError:
        return 0.0


def reply_logprobs(response: requests.Response) -> list[dict[str, Any]] | None:
    """``choices[0].logprobs.content`` of a whole reply (OpenAI's per-token entries); None when absent."""
    try:
        entries = response.json()["choices"][0]["logprobs"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return entries if isinstance(entries, list) else None
