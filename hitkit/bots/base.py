"""The one shape every bot backend has inside hitkit's bot server.

A backend turns an OpenAI-style chat request into one assistant reply. hitkit's bot server hosts
several backends side by side, one per model name: a local Hugging Face model with dynamic
batching (:mod:`hitkit.bots.engine`) or the degraded quality-control bot
(:mod:`hitkit.bots.degraded`). Backends never see HTTP; the server maps their errors to status
codes.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hitkit.bots.protocol import ChatCompletionRequest

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Completion:
    """One generated reply with the token counts OpenAI clients read from ``usage``."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    logprobs: tuple[dict[str, Any], ...] | None = None
    """Each reply token's OpenAI ``logprobs.content`` entry, when the request asked for them
    (:func:`hitkit.bots.logprobs.content`)."""


class BackendOverloaded(RuntimeError):
    """The backend's queue is full; the caller should retry later (HTTP 503)."""


class BackendClosed(RuntimeError):
    """The backend is shutting down and takes no more requests (HTTP 503)."""


class Cancelled(RuntimeError):
    """The request was dropped before its reply was finished (its client left or its deadline passed)."""


class Ticket:
    """One request's place in a backend: wait for its outcome, or cancel it.

    The backend's worker finishes the ticket; anyone may cancel it. A cancelled ticket that is still
    queued or decoding is dropped by the worker at its next step, which then finishes it with
    :class:`Cancelled`, so a reply nobody waits for stops costing compute within one decode step.
    """

    def __init__(self) -> None:
        """An unfinished, uncancelled ticket."""
        self.done = threading.Event()
        self.cancelled = threading.Event()
        self.cancel_reason = ""
        self.result: Completion | None = None
        self.error: BaseException | None = None
        self.partial: Callable[[], str] | None = None
        """The reply so far while it is generated (engines that decode token by token set it; the
        server's streaming replies read it): callable from any thread, never blocking for long."""

    def finish(self, result: Completion | None = None, error: BaseException | None = None) -> None:
        """Record the outcome (a reply or an error) and wake every waiter."""
        self.result, self.error = result, error
        self.done.set()

    def cancel(self, reason: str) -> None:
        """Ask the worker to drop this request; a finished ticket is left as it is."""
        if not self.done.is_set():
            self.cancel_reason = reason
            self.cancelled.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until finished or ``timeout`` seconds passed; True when finished."""
        return self.done.wait(timeout)

    def outcome(self) -> Completion:
        """The reply of a finished ticket, or raise its error."""
        if self.error is not None:
            raise self.error
        assert self.result is not None, "outcome() of an unfinished ticket"
        return self.result


class Backend(ABC):
    """A named chat model that the bot server can host.

    A backend implements :meth:`complete` (blocking) or :meth:`submit` (a :class:`Ticket`, for
    backends with a worker thread, which honour cancellation); each has a default in terms of the
    other.
    """

    name: str
    engine_name = "this"
    """The engine's name, as the server's refusals name it (``llama.cpp``, ``transformers`` …)."""
    gives_logprobs = False
    """Whether replies carry token log-probabilities when asked (``logprobs: true``); the server
    refuses the request with a 400 where not, rather than answering without them."""

    def submit(self, request: ChatCompletionRequest) -> Ticket:
        """Start generating a reply and return its ticket (default: generate now, in this thread)."""
        ticket = Ticket()
        try:
            ticket.finish(self.complete(request))
        except Exception as exc:  # noqa: BLE001 - the ticket carries the error to the waiter
            ticket.finish(error=exc)
        return ticket

    def complete(self, request: ChatCompletionRequest) -> Completion:
        """Generate one reply to ``request.messages``, honouring its sampling parameters.

        Blocks the calling (HTTP handler) thread until the reply is ready. Raises
        :class:`~hitkit.bots.protocol.ProtocolError` for a request this backend cannot serve
        (e.g. a prompt longer than the context), :class:`BackendOverloaded` when its queue is
        full and :class:`BackendClosed` once :meth:`close` has been called.
        """
        ticket = self.submit(request)
        ticket.wait()
        return ticket.outcome()

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Return JSON-able counters (requests, tokens, batch sizes) for ``/metrics``."""

    def close(self) -> None:
        """Stop accepting work and release resources; pending requests fail with BackendClosed."""
