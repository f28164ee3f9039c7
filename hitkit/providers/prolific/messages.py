"""Writing to a study's participants on Prolific (PLATFORMS.md "messages"; API tag ``messages``).

One participant: ``POST /messages/ {recipient_id, body, study_id}``; several: ``POST /messages/bulk/
{ids, body, study_id}``. Both answer 204. The body is the coordinator's text as written.
"""

from __future__ import annotations

from collections.abc import Sequence

from hitkit.providers.prolific.client import ProlificClient, ProlificError, is_prolific_id

MAX_CHARS = 5000
"""The longest message hitkit sends (the API names no limit; a very long one is surely a mistake)."""


def check(participant_ids: Sequence[str], body: str) -> list[str]:
    """The participants to write to, checked, or ProlificError saying what is wrong with the request."""
    text = body.strip()
    if not text:
        raise ProlificError("the message is empty; write what you want to tell the participant", permanent=True)
    if len(text) > MAX_CHARS:
        raise ProlificError(f"the message has {len(text)} characters; keep it under {MAX_CHARS}", permanent=True)
    ids = list(dict.fromkeys(participant_ids))
    bad = [p for p in ids if not is_prolific_id(p)]
    if bad:
        raise ProlificError(
            f"{', '.join(bad[:3])} {'is' if len(bad) == 1 else 'are'} not a Prolific participant id "
            f"(24 hexadecimal characters)",
            permanent=True,
        )
    if not ids:
        raise ProlificError("no participant to write to", permanent=True)
    return ids


def send(api: ProlificClient, study_id: str, participant_ids: Sequence[str], body: str) -> int:
    """Send ``body`` to the participants (one call for one, one bulk call for several); how many."""
    ids = check(participant_ids, body)
    if len(ids) == 1:
        api.call("POST", "/messages/", {"recipient_id": ids[0], "body": body.strip(), "study_id": study_id})
    else:
        api.call("POST", "/messages/bulk/", {"ids": ids, "body": body.strip(), "study_id": study_id})
    return len(ids)
