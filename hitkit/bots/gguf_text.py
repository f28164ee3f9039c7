"""The text side of a GGUF chat model in llama.cpp: its chat template rendered as transformers renders
it, so both engines see the same prompt text, and text to token ids and back.

:mod:`hitkit.bots.llamacpp` batches token ids on its worker thread; this module is what the HTTP
threads and the worker share to turn them into text, under one lock (llama.cpp's tokenizer calls are
not safe from several threads at once).
"""

from __future__ import annotations

import threading
from typing import Any

from hitkit.bots.protocol import ChatCompletionRequest, ProtocolError


def render_chat_template(template: str, messages: list[dict[str, str]], bos: str, eos: str) -> str:
    """Render a Hugging Face chat template (Jinja2) the way ``apply_chat_template`` does."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)


class GgufText:
    """A loaded model's vocabulary and chat template (``template``, from the GGUF metadata), for the
    model served as ``name`` (which error messages name)."""

    def __init__(self, ffi: Any, lib: Any, vocab: Any, template: str, name: str) -> None:
        self.ffi, self.lib, self._vocab = ffi, lib, vocab
        self.template, self.name = template, name
        self._tok_lock = threading.Lock()
        self.bos = self._token_text(lib.llama_vocab_bos(vocab))
        self.eos = self._token_text(lib.llama_vocab_eos(vocab))

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        text = self.lib.llama_vocab_get_text(self._vocab, token)
        return self.ffi.string(text).decode("utf-8", "replace") if text != self.ffi.NULL else ""

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text``, special tokens (e.g. ``<|im_start|>``) parsed, no BOS added."""
        data = text.encode("utf-8")
        size = len(data) + 16
        with self._tok_lock:
            for _ in range(2):
                out = self.ffi.new("llama_token[]", size)
                n = self.lib.llama_tokenize(self._vocab, data, len(data), out, size, False, True)
                if n >= 0:
                    return list(out[0:n])
                size = -n
        raise ProtocolError(f"model {self.name!r} could not tokenize the conversation", param="messages")

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens`` with special tokens left out (as ``skip_special_tokens``)."""
        if not tokens:
            return ""
        arr = self.ffi.new("llama_token[]", tokens)
        size = len(tokens) * 8 + 16
        with self._tok_lock:
            for _ in range(2):
                buf = self.ffi.new("char[]", size)
                n = self.lib.llama_detokenize(self._vocab, arr, len(tokens), buf, size, False, False)
                if n >= 0:
                    return self.ffi.unpack(buf, n).decode("utf-8", "ignore")
                size = -n + 1
        return ""

    def encode(self, request: ChatCompletionRequest) -> list[int]:
        """Apply the GGUF chat template to the request's messages and tokenize."""
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        try:
            text = render_chat_template(self.template, messages, self.bos, self.eos)
        except Exception as exc:  # noqa: BLE001 - template errors are the client's to fix
            raise ProtocolError(
                f"model {self.name!r} chat template rejected the messages: {exc}", param="messages"
            ) from None
        return self.tokenize(text)
