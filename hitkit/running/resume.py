"""What may change when a study is launched again with ``--resume``: its budget and operational
settings may; the fields that define the study may not (a new study under another name instead)."""

from __future__ import annotations

from hitkit.db.models import Study
from hitkit.errors import HitkitError
from hitkit.study.config import StudyConfig
from hitkit.study.loading import STUDY_FILE

RESUMABLE_FIELDS = ("budget", "schedule", "simulated", "server", "bots", "authenticity")
"""Study-file fields that may change between launches; the rest define the study and may not."""


JUDGE_OPERATIONAL = ("url", "options")
"""Parts of ``judge:`` that may change between launches (where the judge is and how patiently it is asked);
the model, its prompt and the crowd's share define the study."""


SYSTEM_OPERATIONAL = ("url",)
"""Parts of a system that may change between launches: where its bot answers (a bot server on another port)."""


def design(key: str, value):
    """The part of a study-file field that defines the study."""
    if key == "judge" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in JUDGE_OPERATIONAL}
    if key == "systems" and isinstance(value, list):
        return [
            {k: v for k, v in s.items() if k not in SYSTEM_OPERATIONAL} if isinstance(s, dict) else s for s in value
        ]
    return value


def defaults(fields) -> dict:
    """The default of every study-file field that has one, as the stored config holds it (JSON)."""
    from pydantic import BaseModel

    out = {}
    for name, info in STUDY_FILE.model_fields.items():
        if name not in fields or info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        out[name] = default.model_dump(mode="json") if isinstance(default, BaseModel) else default
    return out


def apply_resume_changes(study: Study, config: StudyConfig) -> list[str]:
    """Take the budget and operational settings from the study file; refuse changes to the design."""
    fresh = config.model_dump(mode="json")
    # A field added to hitkit after the study was launched is stored as its default was then.
    stored = {**defaults(fresh), **study.config}
    fixed = sorted(
        k
        for k in fresh
        if k not in RESUMABLE_FIELDS and k != "database" and design(k, fresh[k]) != design(k, stored.get(k))
    )
    if fixed:
        raise HitkitError(
            f"{', '.join(fixed)} changed since the study was launched; these define the study and "
            f"cannot change — restore them, or launch a new study under another name"
        )
    changed = [k for k in (*RESUMABLE_FIELDS, "judge", "systems") if fresh.get(k) != stored.get(k)]
    if changed:
        study.config = {**stored, **{k: fresh[k] for k in changed}}
        study.budget = config.budget
    return changed
