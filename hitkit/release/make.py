"""One release from an export folder and its analysis folder: the steps of :mod:`hitkit.release.build` in order."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hitkit.analysis.tables import read_exclusions, table_exists
from hitkit.errors import HitkitError
from hitkit.release import build, scrub
from hitkit.release.card import card
from hitkit.tables.loading import read_any

TIME_DESCRIPTIONS = {
    "shift": "every time was moved by one constant so that the study starts on 2000-01-01 UTC "
    "(durations and order are exact; the real dates are not in the release)",
    "day": "times are the real dates, rounded down to the day (UTC)",
    "drop": "times were removed",
}


@dataclass
class Made:
    """What a call of :func:`make_release` did: the files written (none when it wrote a review file), the
    review file's rows, and the manifest."""

    files: list[Path]
    review_rows: int
    manifest: dict


def pay_summary(export_dir: Path) -> dict:
    """The pay as run, from the export's ledger (before the release leaves it out)."""
    if not table_exists(export_dir / "payments.csv"):
        return {}
    payments = read_any(export_dir, "payments")
    if payments.empty:
        return {}
    paid = payments[payments["status"].astype(str) == "paid"]
    rewards = pd.to_numeric(paid.loc[paid["kind"] == "reward", "amount"], errors="coerce").dropna()
    return {
        "currency": str(payments["currency"].iloc[0]),
        "reward_per_assignment": f"{rewards.median():.2f}" if len(rewards) else None,
        "assignments_paid": int(len(rewards)),
        "bonuses": int((paid["kind"] == "bonus").sum()),
    }


def make_release(
    export_dir: Path,
    analysis_dir: Path,
    out: Path,
    options: build.ReleaseOptions,
    *,
    finder: scrub.Finder | None = None,
    review: Path | None = None,
    spans_file: Path | None = None,
    detector_name: str | None = None,
) -> Made:
    """Write the release of the study in ``export_dir`` (analysed in ``analysis_dir``) to ``out``.

    With ``review``, write the personal-data spans found to that CSV instead and nothing else; with
    ``spans_file``, replace the spans that reviewed file lists (``action`` replace) instead of detecting.
    """
    if review is not None and spans_file is not None:
        raise HitkitError("--review writes the spans to check and --spans reads them back: give one of them")
    release = build.read_study(export_dir, analysis_dir)
    # A reviewed file may name rows this release leaves out (a worker excluded since): checked, then skipped.
    every_text = {(s, k, f): t for s, k, f, t in build.free_texts(release)}
    excluded = build.leave_out(release, read_exclusions(export_dir), options.exclude_workers)
    dropped = build.drop_fields(release, options.drop_fields)
    texts = build.free_texts(release)
    finder = finder or scrub.PresidioFinder()
    if spans_file is not None:
        present = {(s, k, f) for s, k, f, _ in texts}
        spans = [s for s in scrub.read_spans(spans_file, every_text) if (s.source, s.key, s.field) in present]
    else:
        spans = scrub.find_spans(texts, finder)
    if review is not None:
        return Made([], scrub.write_spans(review, spans), {})
    replaced = build.apply_spans(release, spans)
    pseudonyms = build.pseudonymise(release, options.key, options.salt)
    build.move_times(release, options.times)
    configs = {name: len(t) for name, t in release.tables.items()}
    configs["conversations"] = sum(len(c.get("turns", [])) for c in release.conversations)
    manifest = {
        "study": release.info.get("study"),
        "task": release.task,
        "provider": release.info.get("provider"),
        "released": dt.date.today().isoformat(),
        "configs": configs,
        "pseudonyms": {
            "kinds": pseudonyms,
            "method": "rank among the study's ids + HMAC-SHA256 keyed by the study's secret",
            "scope": "the same in every table of this release and in later releases of this study"
            if options.stable_ids
            else "the same in every table of this release; different in every release",
        },
        "personal_data": {
            "detector": detector_name or scrub.PresidioFinder.describe(),
            "fields_scanned": len(texts),
            "replaced": replaced,
            "kept_after_review": sum(1 for s in spans if s.action == "keep"),
            "reviewed": spans_file is not None,
        },
        "removed": {
            "tables": {n: why for n, why in build.DROPPED_TABLES.items() if table_exists(export_dir / f"{n}.csv")},
            "fields": dropped,
            "ids": "platform ids of workers, assignments and HITs (replaced by pseudonyms)",
        },
        "excluded": excluded,
        "times": {"mode": options.times, "description": TIME_DESCRIPTIONS[options.times]},
        "pay": pay_summary(export_dir),
    }
    if options.partial:
        manifest["partial"] = options.partial
    text = card(
        study=str(release.info.get("study")),
        task=release.task,
        configs=configs,
        manifest=manifest,
        summary=release.summary,
        systems=release.tables.get("systems"),
        licence=options.licence,
        language=options.language,
    )
    return Made(build.write_release(out, release, text, manifest), 0, manifest)
