"""``hitkit launch --test-participant``: the coordinator takes their own study on Prolific before it is published.

Source: PLATFORMS.md ("more": "test participants for a dry run (``POST /studies/{id}/test-study/``)"); API
reference ``create-test-study`` (``POST /api/v1/studies/{id}/test-study``, answering ``study_id`` and
``study_url`` of the study created for the test).

In a test run (``HITKIT_PROLIFIC_TEST_RUN=1``, which the flag sets for the launch's own process: its
scheduler runs there) the first post creates the Prolific study as usual but does not publish it: it asks
Prolific for the test study instead, once, remembers it (``prolific_test_study``) and logs its address.
Arrivals from the test study are verified like any other (its submissions name the test study's id). A
later launch without the flag (``hitkit launch STUDY_FILE --resume``) publishes the same draft study
(:func:`publish_after_test`), after the same checks as any publication.
"""

from __future__ import annotations

import logging
import os
from decimal import Decimal

from hitkit.providers.prolific import posting

log = logging.getLogger(__name__)

ENV = "HITKIT_PROLIFIC_TEST_RUN"


def testing() -> bool:
    """Whether this process runs a test (``hitkit launch --test-participant``)."""
    return os.environ.get(ENV) == "1"


def publish_or_test(provider, study_id: str) -> None:
    """The last step of a first post: PUBLISH, or in a test run the test study (once) and no publication."""
    if not testing():
        provider._publish(study_id)  # PUBLISH, recorded first; an ACTIVE study counts as published
        return
    state = provider.state()
    if state.test_study is None:
        made = provider.api.call("POST", f"/studies/{study_id}/test-study") or {}
        provider._record("prolific_test_study", {"study_id": made.get("study_id"), "url": made.get("study_url")})
        state.test_study = made.get("study_id")
        log.warning(
            "Prolific test run: take the study yourself at %s; it is not published. Publish it with "
            "`hitkit launch STUDY_FILE --resume` (without --test-participant).",
            made.get("study_url"),
        )


def publish_after_test(provider) -> bool:
    """Publish a study left unpublished by a test run, once no test runs; True when it was published now."""
    if testing():
        return False
    state = provider.state()
    if state.study_id is None or state.test_study is None:
        return False
    remote = provider.api.call("GET", f"/studies/{state.study_id}/") or {}
    if remote.get("status") != "UNPUBLISHED":
        return False
    reward = Decimal(remote.get("reward", 0)) / 100
    posting.check_balance(
        provider.api,
        provider.settings.workspace,
        reward,
        provider.fee_rate(),
        int(remote.get("total_available_places") or 0),
    )
    provider._publish(state.study_id)
    return True
