"""``hitkit init``: a commented, runnable study a coordinator edits rather than writes from nothing.

Each protocol keeps its own starter (``hitkit/protocols/NAME/starter.py``: ``STUDY_YAML`` and
``material()``, the files the study reads; the lines every starter shares come from the protocol kit,
:mod:`hitkit.protocols.kit.starter`); this module looks it up in the registry and writes it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hitkit.errors import HitkitError
from hitkit.i18n.catalogs import check_language, words_for
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


def in_language(study_yaml: str, worker_text: tuple[str, ...], language: str) -> str:
    """A starter's ``study_yaml`` for workers who read ``language``: ``ui_language`` set after ``task:``, and
    each line whose value is one of the starter's ``worker_text`` (its HIT's title and description, its
    question) in that language, from the shipped catalog. Material (prompts, responses) stays as it is."""
    words = words_for(language)
    out = []
    for line in study_yaml.splitlines(keepends=True):
        m = re.match(r"^(\s*[a-z_]+: )(.+?)(\s+#.*)?\n$", line)
        if m and m.group(2) in worker_text:
            line = m.group(1) + json.dumps(words.gettext(m.group(2)), ensure_ascii=False) + (m.group(3) or "") + "\n"
        out.append(line)
        if line.startswith("task:"):
            out.append(f"ui_language: {language}".ljust(26) + "  # the workers' pages: en, de, fr, es, zh, ar, hi\n")
    return "".join(out)


def scaffold(directory: Path, task: str | None = None, language: str = "en") -> list[Path]:
    """Write ``study.yaml`` and the material it reads into ``directory`` (refuses to overwrite).

    ``task`` is a protocol's name (default: the registry's first protocol); ``language`` (a BCP 47 tag with
    a shipped catalog) is the workers' language: the study's ``ui_language`` and its instructions."""
    proto = protocol(task or next(iter(PROTOCOLS)))
    starter = proto.module("starter")
    study_yaml = starter.STUDY_YAML
    if language != "en":
        check_language(language, directory)
        study_yaml = in_language(study_yaml, getattr(starter, "WORKER_TEXT", ()), language)
    files = {"study.yaml": study_yaml, **starter.material()}
    paths = [directory / name for name in files]
    for path in paths:
        if path.exists():
            raise HitkitError(f"{path} already exists; choose an empty folder for `hitkit init`")
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in zip(paths, files.values()):
        path.write_text(text, encoding="utf-8")
    return paths
