"""Streamed replies of hitkit's bot server: ``stream: true`` answered as OpenAI answers it.

The response is ``text/event-stream``, sent chunked (the connection stays open for the next
request): ``data: {"object": "chat.completion.chunk", "choices": [{"delta": {"content": ...}}]}``
events, the last with ``finish_reason`` and ``usage``, then ``data: [DONE]``. Everything else — the
job registry, cancellation when the client leaves or its deadline passes, one generation per
``Idempotency-Key`` — is the whole reply's (:mod:`hitkit.bots.server`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from hitkit.bots.batching import first_stop
from hitkit.bots.jobs import DEADLINE_HEADER
from hitkit.bots.protocol import ProtocolError, chunk_body, sse

log = logging.getLogger(__name__)
_POLL_S = 0.05  # how often the reply so far is read and its new part sent


def stream_reply(handler, job, request, arrived: float) -> None:
    """Answer ``stream: true`` on ``handler`` (the server's request handler) as OpenAI does:
    ``chat.completion.chunk`` events, then ``data: [DONE]``.

    The reply so far is read from the engine (:attr:`~hitkit.bots.base.Ticket.partial`) every
    poll and its new part sent. A backend that cannot tell (the QC bot) sends its whole reply in
    one chunk. Only a prefix that cannot change is sent: no leading or trailing whitespace (the
    finished reply is stripped), no half character, nothing that may turn into a stop sequence.
    A client that leaves, or whose deadline passes, cancels the generation as for a whole reply;
    an error after the headers went out is sent as an event ``{"error": ...}``.
    """
    app = handler.server.app
    chunk_id, created, model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), request.model
    sent, left = "", None
    try:
        _start(handler)
        _event(handler, chunk_body(model, chunk_id, created, {"role": "assistant", "content": ""}))
        while not job.ticket.wait(_POLL_S):
            if job.deadline is not None and time.monotonic() > job.deadline:
                left = "deadline"
            elif handler._client_gone():
                left = "disconnected"
            if left:
                break
            shown = settled_prefix(job.ticket.partial, request.stop)
            if len(shown) > len(sent) and shown.startswith(sent):
                _event(handler, chunk_body(model, chunk_id, created, {"content": shown[len(sent) :]}))
                sent = shown
    except OSError:  # the client went away while a chunk was written
        left = "disconnected"
    finally:
        app.jobs.detach(job, left)
    if left == "disconnected":
        handler.close_connection = True
        return
    try:
        if left == "deadline":
            app.stats.count("timeouts")
            raise ProtocolError(
                f"no reply within the client's deadline ({DEADLINE_HEADER}); the generation was cancelled",
                status=504,
                kind="timeout_error",
            )
        try:
            completion = job.ticket.outcome()
        except ProtocolError:
            raise
        except Exception as exc:  # the stream's client gets it as an event
            raise ProtocolError(f"generation failed: {exc}", status=503, kind="unavailable_error") from exc
        text = completion.text
        if not text.startswith(sent):  # cannot happen with a sane tokenizer; say so rather than hide it
            log.warning("model %s: the finished reply does not continue the streamed text", model)
        rest = text[len(sent) :] if text.startswith(sent) else text[len(_common(sent, text)) :]
        latency = time.monotonic() - min(arrived, job.created)
        app.stats.reply(latency, completion.completion_tokens)
        last = chunk_body(model, chunk_id, created, {"content": rest} if rest else {}, completion.finish_reason)
        last["usage"] = {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        }
        _event(handler, last)
    except ProtocolError as exc:
        app.stats.count("failed")
        _event(handler, exc.body())
    except OSError:
        handler.close_connection = True
        return
    try:
        _event(handler, "[DONE]")
        _write_chunk(handler, b"")
    except OSError:
        handler.close_connection = True


def _start(handler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Transfer-Encoding", "chunked")
    rate = handler.server.app.stats.tokens_per_s()
    if rate is not None:
        handler.send_header("X-Hitkit-Tokens-Per-S", f"{rate:.2f}")
    handler.end_headers()
    handler.wfile.flush()


def _write_chunk(handler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def _event(handler, data: Any) -> None:
    _write_chunk(handler, sse(data))


def settled_prefix(partial, stops: Sequence[str]) -> str:
    """The part of a reply being generated that its finished form will begin with, for streaming.

    ``partial`` is the engine's reader of the reply so far (None: it cannot tell). Held back: leading
    and trailing whitespace (the finished reply is stripped), a trailing replacement character (half a
    UTF-8 character), and the tail that could still become the start of a stop sequence.
    """
    if partial is None:
        return ""
    text = partial().lstrip()
    cut = first_stop(text, stops)
    if cut is not None:
        text = text[:cut]
    elif stops:
        text = text[: max(0, len(text) - max(len(s) for s in stops) + 1)]
    return text.rstrip("\ufffd").rstrip()


def _common(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
