"""What posting a Prolific study needs besides the calls themselves: its body and the checks before publishing.

Each check raises a permanent :class:`ProlificError` that says what to change, before Prolific is asked
to take money or places it would refuse; the ones that must read Prolific take the client explicitly.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from hitkit.money.amounts import cents, flat_fee
from hitkit.providers.prolific.client import ProlificClient, ProlificError, pay_rule_problems
from hitkit.study.config import StudyConfig

URL_PARAMS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


def study_body(
    config: StudyConfig,
    internal_name: str,
    entry_url: str,
    reward: Decimal,
    places: int,
    completion_code: str,
    screen_out_code: str | None = None,
    group_filters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``POST /studies/`` body of the one Prolific study a hitkit study posts to."""
    s, hit = config.provider.prolific, config.hit
    filters = list(s.filters) + list(group_filters or [])
    if s.blocklist_group:
        filters.append({"filter_id": "participant_group_blocklist", "selected_values": [s.blocklist_group]})
    sep = "&" if "?" in entry_url else "?"
    # No currency field: Prolific pays in the workspace's currency (PLATFORMS.md, create study).
    body: dict[str, Any] = {
        "name": hit.title,
        "internal_name": internal_name,
        "description": hit.description,
        "external_study_url": f"{entry_url}{sep}{URL_PARAMS}",
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": completion_code, "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}
        ],
        "total_available_places": places,
        "estimated_completion_time": s.estimated_minutes,
        "maximum_allowed_time": int(hit.assignment_minutes),
        "reward": int(cents(reward) * 100),
        "device_compatibility": list(s.device_compatibility),
        "filters": filters,
        "submissions_config": {"max_submissions_per_participant": config.schedule.per_worker_cap},
    }
    if s.project:
        body["project"] = s.project
    if screen_out_code is not None and config.screener is not None:
        # API (FixedScreenOut): the code pays fixed_screen_out_reward (minor units, below the study reward) and the
        # study pauses itself after `slots` screen-outs.
        body["completion_codes"].append(
            {
                "code": screen_out_code,
                "code_type": "FIXED_SCREENOUT",
                "actions": [
                    {
                        "action": "FIXED_SCREEN_OUT_PAYMENT",
                        "slots": config.screener.slots,
                        "fixed_screen_out_reward": int(cents(config.screener.screen_out_reward) * 100),
                    }
                ],
            }
        )
    return body


def find_remote_study(api: ProlificClient, project: str | None, internal_name: str) -> str | None:
    """The study this database created before a crash lost its record, found by its unique internal name."""
    path = f"/projects/{project}/studies/" if project else "/studies/"
    for study in api.pages(path):
        if study.get("internal_name") == internal_name:
            return study["id"]
    return None


def check_pay_rules(config: StudyConfig, reward: Decimal) -> None:
    """Refuse pay or times that Prolific would refuse, naming each fix."""
    problems = pay_rule_problems(
        reward, config.provider.currency, config.provider.prolific.estimated_minutes, config.hit.assignment_minutes
    )
    if problems:
        raise ProlificError("Prolific would refuse this study: " + "; ".join(problems), permanent=True)


def workspace_id(api: ProlificClient, workspace: str | None) -> str:
    """The workspace that pays: ``provider.prolific.workspace``, else the account's only one."""
    if workspace:
        return workspace
    found = [w["id"] for w in api.pages("/workspaces/")]
    if len(found) != 1:
        raise ProlificError(
            f"your Prolific account has {len(found)} workspaces; set provider.prolific.workspace "
            f"to the id of the one that pays for this study",
            permanent=True,
        )
    return found[0]


def check_balance(
    api: ProlificClient, workspace: str | None, reward: Decimal, fee_rate: Decimal, new_places: int
) -> None:
    """Refuse to publish (or add places) that the workspace's available balance cannot cover."""
    if new_places <= 0:
        return
    balance = api.call("GET", f"/workspaces/{workspace_id(api, workspace)}/balance/") or {}
    available = balance.get("available_balance")
    if available is None:
        return
    per_place = cents(reward) + flat_fee(reward, fee_rate)
    needed = int(per_place * 100) * new_places
    if available < needed:
        have = Decimal(available) / 100
        raise ProlificError(
            f"your Prolific workspace's available balance is {have} {balance.get('currency_code', '')}, but "
            f"{new_places} more place(s) at {per_place} each (reward + fee) need {Decimal(needed) / 100}; top up "
            f"the workspace on Prolific, then `hitkit resume` the study",
            permanent=True,
        )


def check_currency(remote: Mapping[str, Any], currency: str) -> None:
    """Refuse to publish a study whose workspace pays in another currency than the study file's."""
    theirs = remote.get("currency_code")
    if theirs and theirs.upper() != currency.upper():
        raise ProlificError(
            f"your Prolific workspace pays in {theirs} but the study file says provider.currency: "
            f"{currency}; set provider.currency to {theirs} (and check hit.reward and "
            f"budget in that currency), then launch again — the draft study was not published",
            permanent=True,
        )


def check_reward(api: ProlificClient, study_id: str, hit_key: str, reward: Decimal) -> None:
    """Refuse a HIT whose reward differs from the study's: Prolific pays every participant one reward."""
    remote = api.call("GET", f"/studies/{study_id}/")
    if remote.get("reward") not in (None, int(cents(reward) * 100)):
        raise ProlificError(
            f"a Prolific study pays every participant one reward ({remote['reward']} minor "
            f"units); HIT {hit_key} asks {reward}: give every HIT of the study the same "
            f"hit.reward",
            permanent=True,
        )


def create_study(provider, state, entry_url: str, reward: Decimal, total: int) -> str:
    """The Prolific study of a first post: found by its internal name (drawn once per database and recorded
    before the study exists, so a retry or a rival finds it), else created with ``total`` places."""
    check_pay_rules(provider.config, reward)
    internal_name = state.internal_name
    if internal_name is None:
        # Drawn once per database and remembered before the study exists, so a retry finds it.
        internal_name = f"hitkit:{provider.config.study}:{secrets.token_hex(6)}"
        provider._record("prolific_study_named", {"internal_name": internal_name})
        # The first name recorded wins: a rival that drew another one looks for the same study.
        internal_name = provider.state().internal_name
    study_id = find_remote_study(provider.api, provider.settings.project, internal_name)
    if study_id is None:
        # hitkit's worker entry is per study; the scheduler hands over the HIT's own URL.
        study_entry = entry_url.rsplit("/hit/", 1)[0] + "/enter"
        body = study_body(
            provider.config,
            internal_name,
            study_entry,
            reward,
            total,
            provider.completion_code(),
            provider.screen_out_code(),
            provider.groups.filters(provider.settings.allowlist, provider.settings.qc_failures_blocklist),
        )
        created = provider._call("POST", "/studies/", body)
        study_id = created["id"]
    provider._record("prolific_study_created", {"study_id": study_id, "internal_name": internal_name})
    return study_id
