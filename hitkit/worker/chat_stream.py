"""A chat reply relayed to the page as it is generated: server-sent events, the turn stored once.

The web tier hands :func:`relay` one exchange of :mod:`hitkit.worker.chat` (the worker's message already
stored and committed, or a retry of the reply still owed) and returns what it yields as a
``text/event-stream`` body. The exchange runs on a thread of its own; the page reads:

- ``event: text`` — ``{"text": the reply so far}``, each time it grows (a retry of a broken bot
  stream starts again from a shorter text);
- then one of ``event: state`` — the slot's :class:`~hitkit.worker.chat_turns.ChatState` once the whole reply
  is stored — or ``event: error`` — ``{"error": message, "waiting": true}`` when the bot gave no reply
  (the worker's message is kept, the reply still owed: the page retries), or ``{"error", "status"}``
  for a refused step;
- ``: keep-alive`` comments while nothing happens, so a page that left is noticed.

Nothing half is ever stored: the reply is stored by :func:`hitkit.worker.chat.answer` only when the bot
finished it. When the page stops reading (the web server closes this generator), the next piece the
bot sends raises :class:`Abandoned` inside the exchange, which closes the bot's stream and so cancels
its generation (the bot server's rule for a client that left); the reply stays owed, and the page,
when it comes back, asks for it again.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hitkit.errors import HitkitError
from hitkit.worker.chat import BotReplyError, OnText
from hitkit.worker.chat_turns import ChatState

log = logging.getLogger(__name__)
KEEPALIVE_S = 5.0
"""Longest silence on the stream: a comment then, which also tells the web server whether the page is there."""

Exchange = Callable[[OnText], ChatState]


class Abandoned(Exception):
    """The page stopped reading the reply; the generation is given up and the reply stays owed."""


def event(kind: str, data: Any) -> bytes:
    """One server-sent event named ``kind`` with JSON ``data``."""
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def relay(exchange: Exchange, keepalive_s: float = KEEPALIVE_S) -> Iterator[bytes]:
    """Run ``exchange`` on a thread and yield its reply as server-sent events (module docstring)."""
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    gone = threading.Event()

    def on_text(text: str) -> None:
        if gone.is_set():
            raise Abandoned("the page stopped reading the reply")
        events.put(("text", {"text": text}))

    def run() -> None:
        try:
            events.put(("state", exchange(on_text).as_dict()))
        except BotReplyError as exc:
            events.put(("error", {"error": str(exc), "waiting": True}))
        except HitkitError as exc:
            events.put(("error", {"error": str(exc), "status": getattr(exc, "status", 400)}))
        except Exception:  # a page must always hear how its exchange ended
            log.exception("a streamed chat exchange failed")
            events.put(
                (
                    "error",
                    {
                        "error": "the server failed to store the reply; your message is saved — please try again",
                        "waiting": True,
                    },
                )
            )

    threading.Thread(target=run, name="hitkit-chat-stream", daemon=True).start()
    try:
        while True:
            try:
                kind, data = events.get(timeout=keepalive_s)
            except queue.Empty:
                yield b": keep-alive\n\n"
                continue
            yield event(kind, data)
            if kind != "text":
                return
    finally:
        gone.set()
