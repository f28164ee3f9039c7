"""``hitkit init``: a commented, runnable study a coordinator edits rather than writes from nothing.

Each protocol keeps its own starter (``hitkit/protocols/NAME/starter.py``: ``STUDY_YAML`` and
``material()``, the files the study reads; the sections every starter shares come from
:mod:`hitkit.study.starter_sections`); this module looks it up in the registry and writes it.
"""

from __future__ import annotations

from pathlib import Path

from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS, protocol


def tasks() -> tuple[str, ...]:
    """The protocols ``hitkit init --task`` can scaffold: those whose folder has a starter."""
    found = []
    for proto in PROTOCOLS.values():
        try:
            proto.module("starter")
        except ModuleNotFoundError:
            continue
        found.append(proto.name)
    return tuple(found)


def scaffold(directory: Path, task: str | None = None) -> list[Path]:
    """Write ``study.yaml`` and the material it reads into ``directory`` (refuses to overwrite).

    ``task`` is a protocol's name (default: the registry's first protocol)."""
    proto = protocol(task or next(iter(PROTOCOLS)))
    starter = proto.module("starter")
    files = {"study.yaml": starter.STUDY_YAML, **starter.material()}
    paths = [directory / name for name in files]
    for path in paths:
        if path.exists():
            raise HitkitError(f"{path} already exists; choose an empty folder for `hitkit init`")
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in zip(paths, files.values()):
        path.write_text(text, encoding="utf-8")
    return paths
