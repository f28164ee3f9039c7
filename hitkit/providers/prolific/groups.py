"""Prolific participant groups: re-contact (an allowlist a study invites) and a persistent QC blocklist.

Sources (PLATFORMS.md "groups"; ``prolific-openapi.yml`` tag ``participant-groups``): a group belongs to a
workspace (``POST /participant-groups/ {workspace_id, name, participant_ids}``; listed with
``GET /participant-groups/?workspace_id=``); members are added with ``POST /participant-groups/{id}/participants/
{"participant_ids": [...]}``; a study names a group in its filters as ``participant_group_allowlist`` or
``participant_group_blocklist`` (``selected_values: [group id]``), and an unknown group is an error.

Groups are named in the study file (``provider.prolific.allowlist``, ``qc_failures_blocklist``): by a
Prolific group id (24 hexadecimal characters, a group made on Prolific), or by a name. A named group is made
by hitkit and its id kept in the database's ``setting`` table (one per workspace and name), so one group
serves every study of the coordinator in that database. (Prolific's list of groups, ``GET
/participant-groups/``, takes a required ``filter`` object that the OpenAPI validator cannot read back from
any query string, so hitkit does not look groups up there.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from hitkit.db import settings
from hitkit.db.session import get_engine
from hitkit.providers.prolific.client import ProlificClient, ProlificError, is_prolific_id


class ProlificGroups:
    """The workspace's participant groups, by name (``ProlificProvider.groups``)."""

    def __init__(self, api: ProlificClient, workspace: Callable[[], str], database_url: str):
        self.api, self.database_url = api, database_url
        self._workspace = workspace  # a callable: the workspace that pays (posting.workspace_id)

    def _key(self, name: str) -> str:
        digest = hashlib.sha256(f"{self._workspace()}:{name}".encode()).hexdigest()[:40]
        return f"prolific_group:{digest}"

    def find(self, name: str) -> str | None:
        """The id of the group ``name`` (a Prolific group id as given, or one hitkit made under that name), or None."""
        if is_prolific_id(name):
            return name
        with get_engine(self.database_url).begin() as conn:
            return settings.read(conn, self._key(name))

    def ensure(self, name: str) -> str:
        """The group ``name``, made (empty) in the workspace when hitkit has not made it yet."""
        found = self.find(name)
        if found is not None:
            return found
        made = self.api.call(
            "POST",
            "/participant-groups/",
            {  # no transaction open while Prolific answers
                "workspace_id": self._workspace(),
                "name": name,
                "description": "kept by hitkit (participants added by `hitkit workers` or by quality control)",
            },
        )
        with get_engine(self.database_url).begin() as conn:
            # Two processes making it at once: one id wins, the other group stays empty and unused.
            return settings.read_or_create(conn, self._key(name), lambda: made["id"])

    def add(self, group_id: str, participant_ids: Iterable[str]) -> int:
        """Add participants to a group (adding a member again changes nothing); how many were sent."""
        ids = sorted(set(participant_ids))
        if ids:
            self.api.call("POST", f"/participant-groups/{group_id}/participants/", {"participant_ids": ids})
        return len(ids)

    def filters(self, allowlist: str | None, blocklist: str | None) -> list[dict[str, Any]]:
        """The study's group filters: only the allowlist's members may take part, never the blocklist's."""
        out = []
        if allowlist:
            gid = self.find(allowlist)
            if gid is None:
                raise ProlificError(
                    f"provider.prolific.allowlist names the participant group '{allowlist}', which "
                    f"your Prolific workspace does not have; fill it first (e.g. `hitkit workers "
                    f"--passed-qc FIRST_STUDY_FILE --to-group {allowlist}`)",
                    permanent=True,
                )
            out.append({"filter_id": "participant_group_allowlist", "selected_values": [gid]})
        if blocklist:
            out.append({"filter_id": "participant_group_blocklist", "selected_values": [self.ensure(blocklist)]})
        return out
