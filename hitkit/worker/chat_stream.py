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

A stream ends by its deadline (the bot's whole time budget, :func:`hitkit.worker.chat.stream_deadline_s`)
whatever the bot does: a bot that hangs gets an ``error`` event saying the reply is still owed, and the
thread the web server lent the stream is free again.

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
import time
from collections.abc import Callable, Generator, Iterator
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


STILL_WRITING = "the chatbot is still writing its reply; your message is saved — please wait a moment"
"""What a stream ended at its deadline says (whichever bot: neutral words)."""


class Relay:
    """:func:`relay`'s stream: an iterator of server-sent events with ``close()`` (the web server calls it
    whether or not the stream was read), and ``on_end`` called once when both the page's side and the
    exchange's thread are over — the moment a bounded request gives its place back (:mod:`hitkit.worker.streams`)."""

    def __init__(
        self, exchange: Exchange, keepalive_s: float, deadline_s: float | None, on_end: Callable[[], None] | None
    ) -> None:
        self._exchange, self._keepalive_s, self._deadline_s = exchange, keepalive_s, deadline_s
        self._on_end, self._open = on_end, {"reader", "exchange"}
        self._lock = threading.Lock()
        self._gone = threading.Event()
        self._events = self._run()
        self._began = False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        self._began = True
        return next(self._events)

    def close(self) -> None:
        if self._began:
            self._events.close()  # its ``finally`` ends the reader's side
        else:  # never read: no exchange was started either
            self._end("exchange")
            self._end("reader")

    def _end(self, side: str) -> None:
        with self._lock:
            if side not in self._open:
                return
            self._open.discard(side)
            last = not self._open
        if last and self._on_end is not None:
            self._on_end()

    def _on_text(self, text: str, events: queue.Queue[tuple[str, Any]]) -> None:
        if self._gone.is_set():
            raise Abandoned("the page stopped reading the reply")
        events.put(("text", {"text": text}))

    def _work(self, events: queue.Queue[tuple[str, Any]]) -> None:
        try:
            events.put(("state", self._exchange(lambda text: self._on_text(text, events)).as_dict()))
        except BotReplyError as exc:
            events.put(("error", {"error": str(exc), "waiting": True}))
        except HitkitError as exc:
            events.put(("error", {"error": str(exc), "status": getattr(exc, "status", 400)}))
        except Exception:  # a page must always hear how its exchange ended
            log.exception("a streamed chat exchange failed")
            message = "the server failed to store the reply; your message is saved — please try again"
            events.put(("error", {"error": message, "waiting": True}))
        finally:
            self._end("exchange")

    def _run(self) -> Generator[bytes, None, None]:
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        deadline = None if self._deadline_s is None else time.monotonic() + self._deadline_s
        try:
            threading.Thread(target=self._work, args=(events,), name="hitkit-chat-stream", daemon=True).start()
        except BaseException:
            self._end("exchange")
            raise
        try:
            while True:
                wait = self._keepalive_s if deadline is None else min(self._keepalive_s, deadline - time.monotonic())
                try:
                    kind, data = events.get(timeout=max(0.0, wait))
                except queue.Empty:
                    if deadline is not None and time.monotonic() >= deadline:
                        # The bot hangs: the page hears the reply is still owed; the exchange gives up at its next piece.
                        yield event("error", {"error": STILL_WRITING, "waiting": True})
                        return
                    yield b": keep-alive\n\n"
                    continue
                yield event(kind, data)
                if kind != "text":
                    return
        finally:
            self._gone.set()
            self._end("reader")


def relay(
    exchange: Exchange,
    keepalive_s: float = KEEPALIVE_S,
    deadline_s: float | None = None,
    on_end: Callable[[], None] | None = None,
) -> Relay:
    """Run ``exchange`` on a thread and yield its reply as server-sent events (module docstring); the
    stream ends by ``deadline_s`` whatever the bot does; ``on_end``: see :class:`Relay`."""
    return Relay(exchange, keepalive_s, deadline_s, on_end)
