"""What a participant rejected on Prolific reads: a template the coordinator can change, always long enough.

Prolific needs a rejection to carry a ``message`` of at least 100 characters and a ``rejection_category``
(PLATFORMS.md, "decide" and "messages"). hitkit fills ``provider.prolific.rejection_message`` (default
:data:`DEFAULT`) with the study's name and the reason given (the QC policy's ``qc_reject_reason``, or the
coordinator's on the dashboard), so no rejection hitkit sends can fall short; a template that could is
refused when the study file is loaded.
"""

from __future__ import annotations

import string

MIN_CHARS = 100
CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
"""Prolific's rejection categories (API reference, submission transition)."""
DEFAULT = (
    "Thank you for taking part in '{study}'. We could not accept this submission: {reason} If you think "
    "this is a mistake, please write to us through Prolific's messages and we will look at it again."
)
PLACES = ("study", "reason")


def render(template: str | None, study: str, reason: str) -> str:
    """The message a rejected participant reads: the template filled with the study and the reason."""
    reason = reason.strip()
    if reason and reason[-1] not in ".!?":
        reason += "."
    return (template or DEFAULT).format(study=study, reason=reason)


def problems(template: str | None, category: str) -> list[str]:
    """What is wrong with a rejection template and category, each with the fix; empty when all is well."""
    out = []
    if category not in CATEGORIES:
        out.append(f"rejection_category '{category}' is not one of Prolific's: {', '.join(CATEGORIES)}")
    if template is None:
        return out
    try:
        named = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        return [*out, f"rejection_message has a stray brace ({exc}); write {{{{ and }}}} for literal braces"]
    strangers = sorted(named - set(PLACES))
    if strangers:
        out.append(
            f"rejection_message names {', '.join('{' + s + '}' for s in strangers)}; it may name only "
            f"{{study}} and {{reason}}"
        )
    elif len(render(template, "", "")) < MIN_CHARS:
        out.append(
            f"rejection_message is {len(render(template, '', ''))} characters without the study's name and "
            f"the reason; Prolific needs {MIN_CHARS} or more in every rejection, so lengthen it"
        )
    return out
