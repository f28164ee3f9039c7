"""The analysis step before the fit: battles joined with their conversations, near-duplicate prompts
capped (:mod:`.hygiene`), written prompts categorised (:mod:`.categories`) and declared style covariates
counted (:mod:`.covariates`). Runs in ``hitkit analyze`` / ``report``, never in the web tier."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hitkit.protocols.arena import hygiene
from hitkit.protocols.arena.categories import Embed, categorise, method_words
from hitkit.protocols.arena.covariates import add_covariates
from hitkit.protocols.arena.options import ArenaAnalysisOptions
from hitkit.protocols.arena.transcripts import Transcripts, merge, read_transcripts


@dataclass
class Prepared:
    """Battles ready for the fit, the conversations they came from, and what the step did."""

    battles: pd.DataFrame
    transcripts: Transcripts
    facts: dict = field(default_factory=dict)


def prepare(
    battles: pd.DataFrame,
    folders: list[Path],
    options: ArenaAnalysisOptions,
    *,
    seed: int = 0,
    embed: Embed | None = None,
) -> Prepared:
    """``battles`` with ``prompt_text``, ``prompt_group``, ``capped`` (0/1: left out by the prompt cap),
    categories filled where the study's set gave none, and the covariates' columns."""
    transcripts = merge([read_transcripts(f) for f in folders]) if folders else Transcripts()
    out = battles.copy()
    keys = list(zip(out["study"].astype(str), out["battle_id"].astype(str)))
    out["prompt_text"] = [transcripts.prompts.get(k, "") for k in keys]
    exempt = (out["prompt_id"].astype(str) != "").tolist()
    groups = hygiene.prompt_groups(out["prompt_text"].tolist(), options.prompt_similarity, seed)
    out["prompt_group"] = groups
    out["capped"] = hygiene.capped(groups, exempt, options.prompt_cap).astype(int)
    written = [g for g, free in zip(groups, exempt) if g >= 0 and not free]
    facts: dict = {
        "prompt_cap": options.prompt_cap,
        "prompt_similarity": options.prompt_similarity,
        "written_prompts": len(written),
        "distinct_written_prompts": len(set(written)),
        "capped_battles": int(out["capped"].sum()),
    }
    if options.categories is not None:
        todo = (out["category"].astype(str) == "") & (out["prompt_text"] != "")
        texts = sorted(set(out.loc[todo, "prompt_text"]))
        found = dict(zip(texts, categorise(texts, options.categories, embed))) if texts else {}
        out.loc[todo, "category"] = out.loc[todo, "prompt_text"].map(found)
        facts["categorised_battles"] = int(todo.sum())
        facts["category_method"] = method_words(options.categories)
    if options.style_covariates:
        out = add_covariates(out, transcripts.replies, options.style_covariates)
        facts["style_covariates"] = [c.name for c in options.style_covariates]
    return Prepared(out, transcripts, facts)
