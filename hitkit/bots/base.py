"""The one shape every bot backend has inside hitkit's bot server.

A backend turns an OpenAI-style chat request into one assistant reply. hitkit's bot server hosts
several backends side by side, one per model name: a local Hugging Face model with dynamic
batching (:mod:`hitkit.bots.engine`) or the degraded quality-control bot
(:mod:`hitkit.bots.degraded`). Backends never see HTTP; the server maps their errors to status
codes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
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


class BackendOverloaded(RuntimeError):
    """The backend's queue is full; the caller should retry later (HTTP 503)."""


class BackendClosed(RuntimeError):
    """The backend is shutting down and takes no more requests (HTTP 503)."""


class Backend(ABC):
    """A named chat model that the bot server can host."""

    name: str

    @abstractmethod
    def complete(self, request: ChatCompletionRequest) -> Completion:
        """Generate one reply to ``request.messages``, honouring its sampling parameters.

        Blocks the calling (HTTP handler) thread until the reply is ready. Raises
        :class:`~hitkit.bots.protocol.ProtocolError` for a request this backend cannot serve
        (e.g. a prompt longer than the context), :class:`BackendOverloaded` when its queue is
        full and :class:`BackendClosed` once :meth:`close` has been called.
        """

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Return JSON-able counters (requests, tokens, batch sizes) for ``/metrics``."""

    def close(self) -> None:
        """Stop accepting work and release resources; pending requests fail with BackendClosed."""
