"""Bounds on what a request may carry, checked before anything parses it (pure functions).

Python's ``json`` parser recurses once per level of nesting: a body of 30,000 ``[`` (under the
64 KiB body limit) raises ``RecursionError``, which no route expects (a 500). :func:`json_depth`
measures the nesting of JSON text without parsing it, so the web tier can refuse a body nested
deeper than :data:`MAX_JSON_DEPTH` with a 400 first; :func:`hitkit.imports.mturk.read_batch`
does the same for ``Answer.taskAnswers``.

:func:`text_refusal` says what is wrong with a request's path or query string in bytes as they
came over the wire: not UTF-8 (werkzeug would decode it with replacement characters and pass it
on), or holding a NUL (``%00`` in a chat unit key reached PostgreSQL, which refuses it: a 500).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects a request body may have (the pages send 3 at most)."""


def json_depth(raw: bytes | str, stop_after: int | None = None) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, brackets inside strings not counted.

    Linear, no recursion, never raises on malformed text (the parser judges that later).
    ``stop_after``: return as soon as the depth exceeds it (a hostile body need not be read whole),
    and 0 at once when the text has too few brackets to exceed it (the common, small body).
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if stop_after is not None and data.count(b"[") + data.count(b"{") <= stop_after:
        return 0  # too few brackets to nest deeper than the limit: no need to walk the text
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_after is not None and deepest > stop_after:
                    return deepest
        elif byte in (0x5D, 0x7D) and depth:  # ] }
            depth -= 1
    return deepest


def json_refusal(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why JSON text may not be parsed (nested deeper than ``limit``), or None."""
    depth = json_depth(raw, stop_after=limit)
    if depth > limit:
        return f"the JSON sent is nested more than {limit} levels deep; send a flatter body"
    return None


def text_refusal(path: bytes, query: bytes) -> str | None:
    """Why a request's raw path or query string cannot be taken (not UTF-8, or a NUL), or None.

    ``path``: the path as received (WSGI gives it percent-decoded, as latin-1 bytes); ``query``:
    the raw query string, still percent-encoded. ``+`` means a space in a query and is no concern.
    """
    for what, raw in (("path", path), ("query string", unquote_to_bytes(query))):
        if b"\x00" in raw:
            return f"the {what} of this request holds a NUL character; check the link"
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return f"the {what} of this request is not valid UTF-8; check the link"
    return None
