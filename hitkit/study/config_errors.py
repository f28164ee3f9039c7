"""What a study file's validation errors say: the field, the value, and the fix (the closest field name
for a typo, the expected shape of a missing section), from pydantic's errors and the study's models."""

from __future__ import annotations

import difflib
import re
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import ErrorDetails

_FIX_HINTS = {
    "missing": "add it",
    "extra_forbidden": "remove it or check its spelling",
    "literal_error": "use one of the allowed values",
    "string_pattern_mismatch": "use lower-case letters, digits, '-' and '_'",
    "greater_than": "use a larger number",
    "greater_than_equal": "use a larger number",
    "less_than": "use a smaller number",
    "less_than_equal": "use a smaller number",
    "int_parsing": "write a whole number such as 5, without quotes or units",
    "int_from_float": "write a whole number such as 5 (no decimals)",
    "int_type": "write a whole number such as 5",
    "float_parsing": "write a number such as 2.5, without quotes or units",
    "float_type": "write a number such as 2.5",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "string_type": "write text (quote it if YAML reads it as a number or a list)",
    "list_type": "write a YAML list (lines starting with '- ', or [a, b])",
    "dict_type": "write a YAML mapping (indented 'key: value' lines)",
    "model_type": "write a YAML mapping (indented 'key: value' lines)",
    "model_attributes_type": "write a YAML mapping (indented 'key: value' lines)",
    "decimal_parsing": "write an amount such as 12.50",
    "decimal_type": "write an amount such as 12.50",
    "decimal_max_places": "use at most two decimal places",
    "decimal_max_digits": "use a smaller amount",
    "too_short": "add more entries",
    "too_long": "shorten it",
    "string_too_short": "write some text",
    "string_too_long": "shorten it",
    "path_type": "write a file path (relative to the study file)",
    "enum": "use one of the allowed values",
}
_GENERIC_FIX = "see the study-file reference in the docs (or `hitkit schema`)"
_VALUE_ERROR = re.compile(r"^(Value|Assertion) error, ")
_SAYS_FIX = re.compile(r"\b(add|use|give|remove|rename|write|raise|lower|restore|generate|set|name it|list|turn)\b")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The section models an annotation holds (``Optional[X]``, ``list[X]`` ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _model_at(loc: tuple, root: type[BaseModel]) -> type[BaseModel] | None:
    """The section model whose field ``loc`` names (list positions skipped), or None."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model is not None else None
        models = _models_in(field.annotation) if field is not None else []
        if not models:
            return None
        model = models[0]
    return model


_EXAMPLE_VALUES = {
    "study": "my-study",
    "name": "my-bot",
    "budget": '"30.00"',
    "reward": '"0.60"',
    "url": "http://127.0.0.1:8011",
    "model": "my-model",
}


def _example_value(name: str, annotation: Any) -> str:
    """A value a study file could give the field ``name`` of this type, to show the expected shape."""
    if name in _EXAMPLE_VALUES:
        return _EXAMPLE_VALUES[name]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return f"{args[0]} (one of {', '.join(map(str, args))})"
    if len(args) == 1 and typing.get_origin(annotation) is not list:
        return _example_value(name, args[0])
    return {Path: "FILE.jsonl", int: "5", float: "0.5", Decimal: '"12.50"', bool: "true"}.get(annotation, "...")


def section_example(name: str, field: Any) -> str:
    """', e.g. NAME: {required: value, ...}' for a section, from its model's required fields."""
    models = _models_in(field.annotation)
    if not models:
        return ""
    required = [(n, f) for n, f in models[0].model_fields.items() if f.is_required()]
    if not required:
        return ""
    return f", e.g. {name}: {{" + ", ".join(f"{n}: {_example_value(n, f.annotation)}" for n, f in required) + "}"


def _missing_fix(loc: tuple, root: type[BaseModel]) -> str:
    """What to add for a missing field: its expected shape, with an example."""
    model = _model_at(loc, root)
    field = model.model_fields.get(loc[-1]) if model is not None and loc else None
    if field is None:
        return _FIX_HINTS["missing"]
    name, models = loc[-1], _models_in(field.annotation)
    if typing.get_origin(field.annotation) is list and models:
        least = next((m.min_length for m in field.metadata if hasattr(m, "min_length")), 1)
        required = [(n, f) for n, f in models[0].model_fields.items() if f.is_required()]
        item = ", ".join(f"{n}: {_example_value(n, f.annotation)}" for n, f in required) or "..."
        return f"add at least {least}, e.g. - {item}"
    if models:
        return "add it" + (section_example(name, field) or f", e.g. {name}: {{}}")
    if field.examples:  # a field whose values come from elsewhere (``task``: the registry's names)
        return f"add it, e.g. {name}: {field.examples[0]} (one of {', '.join(map(str, field.examples))})"
    return f"add it, e.g. {name}: {_example_value(name, field.annotation)}"


def _typo_fix(loc: tuple, root: type[BaseModel]) -> str:
    """For a key the section does not know: the closest field name, if one is close."""
    model = _model_at(loc, root)
    if model is None or not loc or not isinstance(loc[-1], str):
        return _FIX_HINTS["extra_forbidden"]
    names = [n for n, f in model.model_fields.items() if not f.exclude]
    close = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else _FIX_HINTS["extra_forbidden"]


def describe(error: ErrorDetails, root: type[BaseModel]) -> str:
    """One line per validation failure: where, what, what was given, and how to fix it."""
    where = ".".join(str(p) for p in error["loc"])
    msg = _VALUE_ERROR.sub("", error["msg"])
    if error["type"] in ("value_error", "assertion_error"):
        # hitkit's own checks already say what to do; their message is the whole line.
        fix = "" if _SAYS_FIX.search(msg) else _GENERIC_FIX
    elif error["type"] == "missing":
        fix = _missing_fix(tuple(error["loc"]), root)
    elif error["type"] == "extra_forbidden":
        fix = _typo_fix(tuple(error["loc"]), root)
    else:
        fix = _FIX_HINTS.get(error["type"], _GENERIC_FIX)
    line = f"  {where}: {msg}" if where else f"  {msg}"
    if (
        error["type"] not in ("missing",)
        and "input" in error
        and not isinstance(error["input"], (dict, list))
        and error["type"] not in ("value_error", "assertion_error")
    ):
        line += f" (got {error['input']!r})"
    return line + (f" — fix: {fix}" if fix else "")
