"""The client every part of hitkit uses to get a reply from a bot under evaluation.

One :class:`BotConfig` per system says where the bot is and how to ask it; :class:`BotClient` turns
a chat history into one reply over the OpenAI chat-completions protocol, so hitkit's own bot
server, vLLM, TGI, llama.cpp or a hosted API are interchangeable. The client is synchronous
(``requests``) because the web tier is. It is deliberately small: trim the history to the bot's
context, cap concurrent calls per system, retry transient failures a bounded number of times, and
otherwise raise :class:`BotUnavailable`, so a page can say "the bot is taking longer, please wait"
and retry without losing the worker's turn, which the caller saved before asking.

Streaming: given ``on_text``, :meth:`BotClient.reply` asks with ``stream: true`` and calls
``on_text(reply so far)`` as OpenAI-style server-sent events (``data: {choices[0].delta.content}`` …
``data: [DONE]``) arrive; a bot that answers with a whole JSON reply instead is one chunk. A stream
that breaks before ``[DONE]`` is a failed attempt like any other: the retry starts the text again
(``on_text`` then sees a shorter text), and hitkit's bot server re-attaches it to the same generation.
If ``on_text`` raises (the reader left), the stream is closed at once, which cancels the generation.

Retries never stack generations: every attempt for one reply carries the same ``Idempotency-Key``,
so hitkit's bot server re-attaches a retry to the generation already running (other servers
ignore the header), and ``X-Hitkit-Deadline-S`` tells it when the client will stop waiting, after
which it drops the generation. Timeouts on slow local models: one attempt waits ``timeout_s``
(30 s) or, once the server has reported its per-chat decode rate (``X-Hitkit-Tokens-Per-S``),
long enough for ``max_tokens`` at twice that pace, whichever is longer; with the default two
retries a reply may take three attempts' time before the bot counts as unavailable.

Log-probabilities: with ``top_logprobs`` set, whole replies ask for ``logprobs: true`` and
:meth:`BotClient.reply_with_logprobs` returns OpenAI's ``logprobs.content`` with the text (an LLM judge reads
its confidence from them: :mod:`hitkit.judges.confidence`); a server that refuses them with a 400 that names
logprobs is asked again without them, and not asked for them again, unless ``logprobs_required``.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import requests
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from requests.adapters import HTTPAdapter

from hitkit.bots.protocol import ChatMessage
from hitkit.bots.replies import PastDeadline, error_message, reply_logprobs, reply_text, retry_after, streamed_text

_RETRYABLE_STATUS = {408, 409, 425, 429}
_MAX_BACKOFF_S = 10.0
_MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators a chat template adds per message


class BotConfig(BaseModel):
    """How to reach and prompt one system under evaluation."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, description="the system's name in the study")
    url: str = Field(description="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    model: str = Field(min_length=1, description="model name the server knows the bot by")
    system_prompt: str = Field(
        default="",
        validation_alias=AliasChoices("system_prompt", "persona"),
        description="system message (a persona) sent before the history",
    )
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=64, ge=1, description="longest reply, in tokens")
    stop: list[str] = Field(default_factory=list, max_length=8)
    context_tokens: int = Field(default=1024, ge=16, description="approximate token budget of system prompt + history")
    timeout_s: float = Field(default=30.0, gt=0, description="wait for one attempt's reply")
    retries: int = Field(default=2, ge=0, le=10, description="further attempts after the first")
    backoff_s: float = Field(default=0.5, ge=0, description="first retry delay; doubles each retry")
    max_concurrency: int = Field(default=8, ge=1, description="calls in flight to this system")
    api_key_env: str | None = Field(default=None, description="environment variable holding a bearer API key")
    top_logprobs: int | None = Field(
        default=None,
        ge=0,
        le=20,
        description="ask whole replies for each token's log-probability and this many alternatives (None: not asked)",
    )
    logprobs_required: bool = Field(
        default=False,
        description="with top_logprobs: a server that refuses logprobs fails the reply (else: asked without)",
    )

    @field_validator("url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"bot url must start with http:// or https://, got {value!r}")
        # Accept the .../v1 form that OpenAI SDK users write; the client appends /v1 itself.
        return value.rstrip("/").removesuffix("/v1")


class BotReply(NamedTuple):
    """A whole reply's text and, where asked for and given, OpenAI's per-token ``logprobs.content`` entries."""

    text: str
    logprobs: list[dict[str, Any]] | None = None


class BotError(Exception):
    """Base of every error raised when asking a bot."""


class BotRequestError(BotError):
    """The bot refused the request itself (HTTP 4xx); retrying cannot help, the config is wrong."""


class BotUnavailable(BotError):
    """No reply after every attempt; show "the bot is taking longer, please wait" and retry later."""

    def __init__(
        self, system: str, attempts: int, reason: str, timed_out: bool = False, waited_s: float | None = None
    ) -> None:
        super().__init__(
            f"bot {system!r} did not reply after {attempts} attempt(s): {reason}. "
            "The worker's turn is kept; ask them to wait and try again."
        )
        self.system = system
        self.attempts = attempts
        self.reason = reason
        self.timed_out = timed_out
        self.waited_s = waited_s


def approx_tokens(text: str) -> int:
    """Rough token count (~4 characters per token for English), without loading a tokenizer."""
    return max(1, math.ceil(len(text) / 4))


def _as_message(turn: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    return turn if isinstance(turn, ChatMessage) else ChatMessage.model_validate(dict(turn))


def truncate_history(
    history: Sequence[ChatMessage | Mapping[str, Any]], system_prompt: str, budget_tokens: int
) -> list[ChatMessage]:
    """System prompt plus the newest turns that fit in ``budget_tokens`` (approximate).

    The newest turn is always kept, whatever its length. If older turns were dropped, leading
    assistant turns are dropped too, because many chat templates require the first non-system
    turn to be the user's.
    """
    turns = [_as_message(t) for t in history]
    used = approx_tokens(system_prompt) + _MESSAGE_OVERHEAD_TOKENS if system_prompt else 0
    kept: list[ChatMessage] = []
    for turn in reversed(turns):
        cost = approx_tokens(turn.content) + _MESSAGE_OVERHEAD_TOKENS
        if kept and used + cost > budget_tokens:
            break
        kept.append(turn)
        used += cost
    kept.reverse()
    if len(kept) < len(turns):
        while len(kept) > 1 and kept[0].role == "assistant":
            kept.pop(0)
    head = [ChatMessage(role="system", content=system_prompt)] if system_prompt else []
    return head + kept


_semaphores: dict[tuple[str, str, str, int], threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


def _semaphore(config: BotConfig) -> threading.BoundedSemaphore:
    # Shared by every client of the same system in this process, so a web tier that builds a
    # client per request still caps what it sends to one bot.
    key = (config.name, config.url, config.model, config.max_concurrency)
    with _semaphores_lock:
        if key not in _semaphores:
            _semaphores[key] = threading.BoundedSemaphore(config.max_concurrency)
        return _semaphores[key]


class BotClient:
    """Asks one system for replies; thread-safe; share one per system."""

    def __init__(self, config: BotConfig, session: requests.Session | None = None) -> None:
        """Prepare a pooled HTTP session sized to ``config.max_concurrency``."""
        self.config = config
        self.endpoint = f"{config.url}/v1/chat/completions"
        self._semaphore = _semaphore(config)
        self._session = session or requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=config.max_concurrency)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        # The environment's proxies and CA bundle are read once here, not on every reply: requests'
        # trust_env walks os.environ and looks for ~/.netrc on each call (about 1 ms of a chat turn).
        if session is None:
            self._session.proxies.update(requests.utils.get_environ_proxies(self.endpoint))
            self._session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
            self._session.trust_env = False
        self._headers = {"Content-Type": "application/json"}
        self._tokens_per_s: float | None = None  # the server's recent per-chat decode rate
        self._logprobs_refused = False  # the server refused logprobs once: not asked again
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise BotRequestError(
                    f"bot {config.name!r}: environment variable {config.api_key_env} (api_key_env) is not set"
                )
            self._headers["Authorization"] = f"Bearer {key}"

    def messages(self, history: Sequence[ChatMessage | Mapping[str, Any]]) -> list[ChatMessage]:
        """The messages actually sent: system prompt + history trimmed to ``context_tokens``."""
        return truncate_history(history, self.config.system_prompt, self.config.context_tokens)

    def payload(self, history: Sequence[ChatMessage | Mapping[str, Any]]) -> dict[str, Any]:
        """The JSON body of the chat-completions request for ``history``."""
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": [m.model_dump() for m in self.messages(history)],
            "max_tokens": c.max_tokens,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "stream": False,
        }
        if c.stop:
            body["stop"] = list(c.stop)
        if c.top_logprobs is not None and not self._logprobs_refused:
            body["logprobs"], body["top_logprobs"] = True, c.top_logprobs
        return body

    def reply(
        self, history: Sequence[ChatMessage | Mapping[str, Any]], on_text: Callable[[str], None] | None = None
    ) -> str:
        """Return the bot's next turn after ``history`` (user/assistant messages, oldest first);
        with ``on_text``, streamed, each piece announced as the reply so far (see the module docstring).

        Raises :class:`BotUnavailable` once every attempt failed or timed out (also when
        ``max_concurrency`` calls stay busy for ``timeout_s``) and :class:`BotRequestError` when
        the bot rejects the request as invalid.
        """
        return self.reply_with_logprobs(history, on_text).text

    def reply_with_logprobs(
        self, history: Sequence[ChatMessage | Mapping[str, Any]], on_text: Callable[[str], None] | None = None
    ) -> BotReply:
        """:meth:`reply`, with the reply's token log-probabilities where ``top_logprobs`` asked for them and
        the server gave them (never for a streamed reply)."""
        c = self.config
        body = self.payload(history)
        body["stream"] = on_text is not None
        if on_text is not None:  # logprobs come with whole replies only
            body = {k: v for k, v in body.items() if "logprobs" not in k}
        if not self._semaphore.acquire(timeout=c.timeout_s):
            raise BotUnavailable(
                c.name,
                0,
                f"{c.max_concurrency} calls to it stayed busy for {c.timeout_s:g} s",
                timed_out=True,
                waited_s=c.timeout_s,
            )
        try:
            return self._post_with_retries(body, on_text)
        finally:
            self._semaphore.release()

    def attempt_timeout(self) -> float:
        """Seconds one attempt waits: ``timeout_s``, or ``max_tokens`` at half the server's reported
        per-chat decode rate if that is longer (capped at ten times ``timeout_s``)."""
        c = self.config
        rate = self._tokens_per_s
        if not rate:
            return c.timeout_s
        return max(c.timeout_s, min(2.0 * c.max_tokens / rate + 2.0, 10.0 * c.timeout_s))

    def _post_with_retries(self, body: dict[str, Any], on_text: Callable[[str], None] | None = None) -> BotReply:
        c = self.config
        reason = "no attempt made"
        timed_out = False
        timeout = self.attempt_timeout()
        started = time.monotonic()
        budget = timeout * (c.retries + 1)
        key = uuid.uuid4().hex  # one per reply: the server joins retries to the same generation
        for attempt in range(c.retries + 1):
            wait_hint = 0.0
            left = max(1.0, budget - (time.monotonic() - started))
            headers = {**self._headers, "Idempotency-Key": key, "X-Hitkit-Deadline-S": f"{left:.1f}"}
            try:
                response = self._session.post(
                    self.endpoint,
                    json=body,
                    headers=headers,
                    timeout=(min(timeout, 10.0), timeout),
                    stream=on_text is not None,
                )
            except requests.Timeout:
                reason = f"no reply within {timeout:g} s"
                timed_out = True
            except requests.ConnectionError as exc:
                reason = f"cannot connect to {self.endpoint} ({type(exc).__name__})"
            else:
                if response.status_code == 200 and on_text is not None:
                    self._note_rate(response)
                    try:
                        text, reason = streamed_text(response, on_text, started + budget)
                    except PastDeadline:
                        text, reason, timed_out = None, f"the stream went on past the reply's {budget:g} s", True
                    except requests.Timeout:
                        text, reason, timed_out = None, f"the stream paused for more than {timeout:g} s", True
                    except requests.RequestException as exc:
                        text, reason = None, f"the stream broke ({type(exc).__name__})"
                    finally:
                        response.close()
                    if text is not None:
                        return BotReply(text)
                elif response.status_code == 200:
                    self._note_rate(response)
                    text = reply_text(response)
                    if text is not None:
                        return BotReply(text, reply_logprobs(response))
                    reason = "the server answered 200 without choices[0].message.content"
                elif response.status_code in _RETRYABLE_STATUS or response.status_code >= 500:
                    reason = f"HTTP {response.status_code}: {error_message(response)}"
                    timed_out = response.status_code in (408, 504)
                    wait_hint = retry_after(response)
                elif on_text is not None and response.status_code == 400 and "stream" in error_message(response):
                    # A server that refuses to stream (hitkit's own before it could): ask for the whole reply.
                    whole = self._post_with_retries({**body, "stream": False})
                    on_text(whole.text)
                    return whole
                elif (
                    "logprobs" in body
                    and response.status_code == 400
                    and "logprobs" in error_message(response)
                    and not c.logprobs_required
                ):
                    # A server that gives no logprobs (llama.cpp's before, a hosted model): ask without.
                    self._logprobs_refused = True
                    return self._post_with_retries({k: v for k, v in body.items() if "logprobs" not in k})
                else:
                    raise BotRequestError(
                        f"bot {c.name!r} refused the request (HTTP {response.status_code}): {error_message(response)}"
                    )
            if time.monotonic() - started >= budget:
                break  # the reply's whole time is spent (a stream that trickled without text): no attempt is left
            if attempt < c.retries:
                delay = min(c.backoff_s * 2**attempt, _MAX_BACKOFF_S)
                # Jitter spreads the retries of many chats that failed at the same moment.
                time.sleep(max(delay * random.uniform(0.8, 1.2), min(wait_hint, _MAX_BACKOFF_S)))
        raise BotUnavailable(c.name, c.retries + 1, reason, timed_out=timed_out, waited_s=time.monotonic() - started)

    def _note_rate(self, response: requests.Response) -> None:
        try:
            rate = float(response.headers.get("X-Hitkit-Tokens-Per-S", ""))
        except ValueError:
            return
        if rate > 0:
            self._tokens_per_s = rate

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def __enter__(self) -> BotClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
