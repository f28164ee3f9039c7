"""The OpenAI chat-completions wire format, validated once at the edge.

Only what a chat evaluation needs is modelled: ``/v1/chat/completions`` with one choice, whole or
streamed (``stream: true``: server-sent events ``data: {chat.completion.chunk}`` … ``data: [DONE]``,
as OpenAI sends them). ``seed`` makes a sampled reply repeatable (same seed, same prompt, same engine: same
reply). Fields that OpenAI clients send routinely but that hitkit's engines do not implement
(``user``, penalties …) are accepted and ignored; a field that would change the
shape of the answer (``n`` > 1) is refused with a 400 rather than silently dropped. ``logprobs: true``
(with ``top_logprobs``: 0-20 alternatives per token) asks for each reply token's log-probability, whole
replies only (:mod:`hitkit.bots.logprobs`); an engine that cannot give them refuses with a 400.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

if TYPE_CHECKING:  # pragma: no cover - import only for type checkers, avoids an import cycle
    from hitkit.bots.base import Completion

Role = Literal["system", "user", "assistant"]
DEFAULT_MAX_TOKENS = 128
MAX_STOP_SEQUENCES = 8
MAX_TOP_LOGPROBS = 20  # OpenAI's limit


class ProtocolError(Exception):
    """A request the server refuses, with the HTTP status and an actionable message."""

    def __init__(
        self, message: str, status: int = 400, param: str | None = None, kind: str = "invalid_request_error"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.kind = kind

    def body(self) -> dict[str, Any]:
        """Return the OpenAI-style error object ``{"error": {...}}``."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}


class ChatMessage(BaseModel):
    """One turn of a conversation as OpenAI clients send it."""

    model_config = ConfigDict(extra="ignore")

    role: Role
    content: str

    @field_validator("content", mode="before")
    @classmethod
    def _join_text_parts(cls, value: Any) -> Any:
        # Newer OpenAI clients may send content as [{"type": "text", "text": ...}, ...].
        if isinstance(value, list):
            texts = []
            for part in value:
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    raise ValueError("only text content parts ({'type': 'text', 'text': ...}) are supported")
                texts.append(part["text"])
            return "".join(texts)
        return value


class ChatCompletionRequest(BaseModel):
    """A validated ``POST /v1/chat/completions`` body."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    stop: list[str] = Field(default_factory=list)
    seed: int | None = Field(default=None, ge=0, lt=2**32)
    stream: bool = False
    n: int = 1
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_as_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        return value

    @field_validator("stop")
    @classmethod
    def _stop_sane(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences, got {len(value)}")
        if any(s == "" for s in value):
            raise ValueError("stop sequences must be non-empty strings")
        return value

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"only n=1 is supported, got n={value}")
        return value

    @field_validator("logprobs")
    @classmethod
    def _whole_replies_only(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("stream"):
            raise ValueError("logprobs are given with whole replies only; send stream: false to get them")
        return value

    @field_validator("top_logprobs")
    @classmethod
    def _needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true")
        return value

    @property
    def want_logprobs(self) -> int | None:
        """How many alternatives per reply token the client asked for (None: no logprobs at all)."""
        return (self.top_logprobs or 0) if self.logprobs else None

    @property
    def reply_budget(self) -> int:
        """The most tokens the reply may have (``max_completion_tokens`` wins, as in OpenAI)."""
        return self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "body"
        msg = item["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def parse_chat_request(raw: bytes) -> ChatCompletionRequest:
    """Parse and validate a request body; raise :class:`ProtocolError` (400) saying what is wrong."""
    try:
        data = json.loads(raw.decode("utf-8") if raw else "")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"request body must be a JSON object, got {type(data).__name__}")
    try:
        return ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]["loc"]
        raise ProtocolError(
            f"invalid chat completion request: {_describe(exc)}", param=str(first[0]) if first else None
        ) from None


def completion_body(model: str, completion: Completion) -> dict[str, Any]:
    """Build the OpenAI ``chat.completion`` response object for one reply."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "logprobs": None if completion.logprobs is None else {"content": list(completion.logprobs)},
                "finish_reason": completion.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        },
    }


def chunk_body(
    model: str, chunk_id: str, created: int, delta: dict[str, str], finish_reason: str | None = None
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of a streamed reply (OpenAI's shape: ``choices[0].delta``)."""
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def sse(data: Any) -> bytes:
    """One server-sent event carrying ``data`` (JSON, or the literal ``[DONE]``)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()
