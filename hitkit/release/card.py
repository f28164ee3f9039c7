"""The dataset card (``README.md``) and ``release.json`` of a release.

The card follows the data hub's dataset card: a YAML header (licence, languages, size category, tags and one
``configs`` entry per table, so ``datasets.load_dataset(DIR, NAME)`` finds each) and the sections a reader
and an ethics board look for: description, languages, size, collection process (the protocol, the pay, the
quality control and the exclusions as run), the analysis's headline table, what was removed, licence,
citation and known limitations. Everything in it is read from the release itself; nothing is a template
left to fill in.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import yaml

from hitkit.protocols import PROTOCOLS


def size_category(rows: int) -> str:
    """The data hub's size category for ``rows`` rows."""
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < bound:
            return name
    return "n>1M"


def headline(systems: pd.DataFrame | None, limit: int = 12) -> str:
    """The analysis's ranking as a Markdown table (numbers to 3 decimals, blanks for missing values)."""
    if systems is None or systems.empty:
        return "The analysis ranked no systems."
    table = systems.head(limit)
    columns = [c for c in table.columns if c not in ("study",)][:8]

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    more = f"\n\n({len(systems) - limit} more rows in the `systems` configuration.)" if len(systems) > limit else ""
    return "\n".join(lines) + more


def front_matter(task: str, configs: dict[str, int], licence: str, language: str) -> dict[str, Any]:
    """The card's YAML header: licence, language, size, tags and one configuration per table."""
    proto = PROTOCOLS[task]
    header: dict[str, Any] = {
        "license": licence,
        "language": [language],
        "pretty_name": None,
        "size_categories": [size_category(configs.get(proto.table, 0))],
        "tags": ["human-evaluation", "chatbots", "crowdsourcing", task.replace("_", "-"), "hitkit"],
        "configs": [
            {
                "config_name": name,
                "data_files": f"{name}/*.parquet",
                **({"default": True} if name == proto.table else {}),
            }
            for name in configs
        ],
    }
    return header


def card(
    *,
    study: str,
    task: str,
    configs: dict[str, int],
    manifest: dict,
    summary: dict,
    systems: pd.DataFrame | None,
    licence: str,
    language: str,
) -> str:
    """The dataset card's Markdown."""
    proto = PROTOCOLS[task]
    header = front_matter(task, configs, licence, language)
    header["pretty_name"] = f"{study}: {proto.title}"
    excluded = manifest["excluded"]
    pii = manifest["personal_data"]
    replaced = ", ".join(f"{n} {kind.lower()}" for kind, n in pii["replaced"].items()) or "none found"
    qc = ""
    if "passed" in summary and "workers" in summary:
        qc = f" {summary['passed']} of {summary['workers']} workers passed the study's quality control."
    pay = manifest.get("pay") or {}
    pay_line = (
        f"Workers were paid {pay['reward_per_assignment']} {pay['currency']} per HIT "
        f"({pay['assignments_paid']} HITs paid, {pay['bonuses']} bonuses)."
        if pay.get("reward_per_assignment")
        else "The export holds no payments (a simulated or unpaid study)."
    )
    provider = manifest.get("provider", "unknown")
    tables = "\n".join(f"| `{name}` | {rows:,} |" for name, rows in configs.items())
    removed_tables = "\n".join(f"- `{name}`: {why}" for name, why in manifest["removed"]["tables"].items())
    fields = ", ".join(f"`{f}`" for f in manifest["removed"]["fields"]) or "none"
    limitations = [
        "Personal data was found by an automatic detector "
        f"({pii['detector']}); such detectors miss some names and addresses and replace some words that were not "
        "personal." + (" The coordinator reviewed the flagged spans." if pii["reviewed"] else ""),
        "Workers are pseudonymous within this release only; their number of HITs and their answers remain, and "
        "a worker who is known to have taken part may still be recognised by what they wrote.",
        f"Times: {manifest['times']['description']}.",
    ]
    if manifest.get("partial"):
        limitations.insert(0, f"Partial: {manifest['partial']}; work handed in later is not in this release.")
    if provider == "simulated":
        limitations.insert(0, "The crowd was simulated by hitkit (a dry run): these answers are not people's.")
    cite_key = "".join(ch if ch.isalnum() else "_" for ch in study)
    body = f"""
# {study}

## Description

Human evaluation data collected with hitkit by the {proto.title} protocol (`task: {task}`): every answer the
study's workers handed in, the conversations they took part in, each worker's quality-control outcome and the
systems' ranking.

## Languages

The worker pages were shown in `{language}`; free text is as the workers wrote it.

## Size

| configuration | rows |
|---|---|
{tables}

Load one configuration with `datasets.load_dataset("DIR", "{proto.table}")`, or
`datasets.load_dataset("parquet", data_dir="DIR/{proto.table}")`, or with hitkit: `hitkit.load("DIR")`.

## Collection process

Protocol: {proto.title} (`task: {task}`), on the `{provider}` crowd. {pay_line}{qc}
Left out: {excluded['assignments_excluded_by_coordinator']} assignment(s) the coordinator excluded,
{excluded['assignments_not_handed_in']} never handed in (returned or expired), and every assignment of
{excluded['workers_withdrawn']} worker(s) who withdrew; {excluded['workers_left_out']} worker(s) appear in no table.

## Analysis

The study's own analysis (hitkit {summary.get('software', {}).get('hitkit', '')}), as run on these tables:

{headline(systems)}

## Personal data removed

Worker, assignment and HIT ids are keyed pseudonyms ({manifest['pseudonyms']['scope']}).
Personal data in free text was replaced by typed placeholders: {replaced}.
Tables left out:

{removed_tables}

Fields dropped by the coordinator: {fields}. `release.json` lists all of this in machine-readable form.

## Licence

{licence}

## Citation

```bibtex
@misc{{{cite_key},
  title = {{{study}: {proto.title}}},
  note = {{Human evaluation data collected and released with hitkit}},
  year = {{{manifest['released'][:4]}}}
}}
```

## Known limitations

""" + "\n".join(f"- {line}" for line in limitations)
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n" + body + "\n"
