"""A scripted bot that types: hitkit's real bot server hosting a backend that writes one word every
``step_s``, exposes the reply so far (as the llama.cpp and transformers engines do) and stops when its
ticket is cancelled. Slow on purpose, so a test can break a stream while a reply is half written.

Run as ``python -m tests.streaming_bot PORT STEP_S`` for a bot process a test can kill.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from hitkit.bots.base import Backend, Cancelled, Completion, Ticket
from hitkit.bots.protocol import ChatCompletionRequest


def script(request: ChatCompletionRequest) -> list[str]:
    """The reply's words: which user turn it answers, then counting words up to ``max_tokens``."""
    asked = sum(m.role == "user" for m in request.messages)
    return [f"reply{asked}"] + [f"w{i}" for i in range(1, request.reply_budget)]


class Typist(Backend):
    """Writes the scripted reply word by word on its own thread; counts generations and cancellations."""

    def __init__(self, name: str, step_s: float = 0.05) -> None:
        self.name, self.step_s = name, step_s
        self.started = self.finished = self.cancelled = 0
        self._lock = threading.Lock()

    def words(self, request: ChatCompletionRequest) -> list[str]:
        """The reply's words (a subclass may vary them)."""
        return script(request)

    def pace(self) -> float:
        """Seconds before each word of one reply (a subclass may vary it)."""
        return self.step_s

    def lead(self) -> float:
        """Seconds before the first word, besides its step (a model reading the prompt; a subclass may vary it)."""
        return 0.0

    def submit(self, request: ChatCompletionRequest) -> Ticket:
        ticket, words, written, step, lead = Ticket(), self.words(request), [], self.pace(), self.lead()
        ticket.partial = lambda: " ".join(list(written))
        with self._lock:
            self.started += 1

        def write() -> None:
            for i, word in enumerate(words):
                if ticket.cancelled.wait(step + (lead if i == 0 else 0.0)):
                    with self._lock:
                        self.cancelled += 1
                    ticket.finish(error=Cancelled(ticket.cancel_reason))
                    return
                written.append(word)
            with self._lock:
                self.finished += 1
            ticket.finish(Completion(" ".join(words), "length", 1, len(words)))

        threading.Thread(target=write, daemon=True).start()
        return ticket

    def stats(self) -> dict[str, Any]:
        return {"started": self.started, "finished": self.finished, "cancelled": self.cancelled}


if __name__ == "__main__":
    from hitkit.bots.server import BotServer

    port, step = int(sys.argv[1]), float(sys.argv[2])
    names = sys.argv[3:] or ["anna", "bert", "cleo", "dora", "emil", "qc"]
    BotServer({n: Typist(n, step) for n in names}, port=port).serve_until_signal()
