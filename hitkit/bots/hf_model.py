"""Loading a local Hugging Face causal LM (a model folder or a GGUF file, offline) on the best device, and
the token ids that end its replies."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase


def pick_device(requested: str = "auto") -> torch.device:
    """``auto`` → CUDA when a GPU is visible, else CPU; otherwise the device named."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def load_model(
    path: str | Path,
    gguf_file: str | None = None,
    device: str = "auto",
) -> tuple[Any, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer from a directory, or from a GGUF file in that directory.

    Never downloads: ``local_files_only`` is forced, so a wrong path fails here with a clear error.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model path {path} does not exist")
    if gguf_file is None and path.is_file() and path.suffix == ".gguf":
        path, gguf_file = path.parent, path.name
    if gguf_file is not None and not (path / gguf_file).is_file():
        raise FileNotFoundError(f"GGUF file {path / gguf_file} does not exist")
    dev = pick_device(device)
    # GGUF weights are de-quantised on load; half precision only pays off on a GPU.
    dtype = (
        torch.float32 if dev.type == "cpu" else (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    )
    kwargs: dict[str, Any] = {"local_files_only": True}
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
    with _gguf_parsed_once() if gguf_file is not None else nullcontext():
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs)
    model = model.to(dev).eval()
    return model, tokenizer


_gguf_lock = threading.Lock()


@contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """While one GGUF model loads, parse the file once and build gguf's tensor-name table once.

    transformers parses the file three times (for the tokenizer, the config and the weights) and builds
    the name table once per submodule (397 times for SmolLM2-135M), which together took about half of the
    load on a CPU. Both are read-only, so one of each serves every call; gguf's own functions are back in
    place when the load ends (loads take turns, so no other load sees the shared ones).
    """
    import gguf as gguf_module

    gguf: Any = gguf_module  # its attributes are swapped below and put back
    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, Any] = {}
    maps: dict[tuple, Any] = {}

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = real_reader(path, *args, **kwargs)
        return readers[key]

    def name_map(arch: Any, n_blocks: int) -> Any:
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = real_map(arch, n_blocks)
        return maps[arch, n_blocks]

    with _gguf_lock:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_map


def eos_token_ids(model: Any, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """Token ids that end a reply: the generation config's (chat models often list the
    end-of-turn token there) and the tokenizer's EOS."""
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids
