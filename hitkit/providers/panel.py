"""The ``panel`` provider: any platform that sends participants to a URL with their id in query
parameters and takes them back with a completion code or redirect — CloudResearch Connect, SONA,
a university pool, a generic panel (``provider.panel`` in the study file, :class:`PanelConfig`).

The panel lists one study link; hitkit chooses each participant's HIT (``chooses_hit``), as for
Prolific. Participants arrive at ``/s/STUDY/enter?WORKER_PARAM=ID`` (plus ``SESSION_PARAM=ID`` when
the panel sends a visit id) and, once they submit, are redirected to ``completion_url`` or shown
``completion_code`` to enter on the panel.

A query parameter proves nothing: anyone can type a URL with someone's id. So the platform's word
decides what counts (``confirmation = "coordinator"``): the coordinator downloads the panel's list
of who completed and runs ``hitkit confirm STUDY_FILE --completed FILE.csv``
(:func:`confirm_completed`). Until then the work is exported as ``unconfirmed``, left out of the
task tables and the analysis, and not approved. The panel pays the participants; hitkit's ledger
books the reward of confirmed work when the scheduler approves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Row, or_, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Hit, Worker, utcnow
from hitkit.errors import ConfigError, FlowError, InputError
from hitkit.events import add_event
from hitkit.providers.base import Arrival, Completion, CompletionKind
from hitkit.providers.internal import InternalProvider
from hitkit.study.config import StudyConfig
from hitkit.study.provider_sections import PanelConfig
from hitkit.tables.schema import DONE_STATUSES

PANEL_ID = re.compile(r"[A-Za-z0-9_.@:\-]{1,128}")
"""What a participant or session id in a panel URL may look like: panels use letters, digits and a
few separators; anything else (an unreplaced ``{{%PARTICIPANT_ID%}}``, a path, markup) is refused.
Always ``fullmatch``: ``$`` would also match before a final newline, so ``id%0a`` would pass as a new id."""


class PanelProvider(InternalProvider):
    """A URL-parameter panel; the HIT rows are the listing, the coordinator confirms who completed."""

    name = "panel"
    chooses_hit = True
    confirmation = "coordinator"
    resume_needs_proof = True

    def __init__(self, config: StudyConfig, secret: str):
        super().__init__(config, secret)
        panel = config.provider.panel
        if panel is None:  # ProviderConfig's validator requires the section for kind 'panel'
            raise ConfigError(
                "provider.kind 'panel' needs a provider.panel section: worker_param and "
                "completion_url and/or completion_code (see docs/howto/panels.md)"
            )
        self.settings: PanelConfig = panel

    def entry_link(self, base_url: str) -> str:
        """The study link to give the panel, with its placeholders for the ids left as ``<...>``."""
        s = self.settings
        params = f"{s.worker_param}=<participant id>"
        if s.session_param:
            params += f"&{s.session_param}=<session id>"
        return f"{base_url.rstrip('/')}/s/{self.config.study}/enter?{params}"

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        """The participant named by ``worker_param`` (and ``session_param``); no id at all is a preview."""
        s = self.settings
        worker = args.get(s.worker_param)
        if worker is None or worker == "":
            if s.session_param and args.get(s.session_param):
                raise FlowError(
                    f"this link has no participant id ({s.worker_param}); open the study again from {s.name}", 400
                )
            return Arrival(preview=True)
        session_id = args.get(s.session_param) if s.session_param else None
        for what, value in ((s.worker_param, worker), (s.session_param, session_id)):
            if value is not None and not PANEL_ID.fullmatch(value):
                raise FlowError(
                    f"the {what} in this link is not a valid id; open the study again from {s.name} "
                    f"(coordinators: check that the panel fills in its placeholder)",
                    400,
                )
        if s.session_param and not session_id:
            raise FlowError(f"this link has no session id ({s.session_param}); open the study again from {s.name}", 400)
        return Arrival(preview=False, worker_id=worker, provider_assignment_id=session_id)

    def completion(self, provider_assignment_id: str | None, args: Mapping[str, str]) -> Completion:
        """Redirect to the panel's completion URL, or show the completion code on hitkit's page."""
        s = self.settings
        if s.completion_url:
            url = s.completion_url.replace("{code}", quote(s.completion_code or "", safe=""))
            url = url.replace("{session_id}", quote(provider_assignment_id or "", safe=""))
            return Completion(CompletionKind.REDIRECT, url=url, code=s.completion_code)
        return Completion(CompletionKind.PAGE, code=s.completion_code)


# Confirming work from the panel's completion list -----------------------------------------------
ID_COLUMNS = ("worker_id", "participant_id", "participantId", "session_id", "assignment_id", "id")


WORKER_COLUMNS = ("worker_id", "participant_id", "participantId")
Listed = tuple[str, "str | None"]
"""One row of a completion list: the id that counts, and the participant id on the same row (or None)."""


def read_completed(path: str | Path, column: str | None, config: StudyConfig) -> list[Listed]:
    """The ids in the panel's completion CSV, each with the participant id of its row where the file has one.

    Where the panel sends a session id (``session_param``), the session column is what counts: a
    participant id travels unsigned in a URL, so only the session that arrived may confirm work
    (``column``, else the session parameter's name, ``session_id`` or ``assignment_id``). Without
    one, the participant id column counts (``column``, else the worker parameter's name and the usual
    id columns). Empty cells are skipped, repeats kept once.
    """
    import pandas as pd

    path = Path(path)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(
            path, f"is not a readable CSV with a header row ({exc}); export the completion list from the panel as CSV"
        ) from None
    panel = config.provider.panel
    session_param = (panel.session_param if panel else None) or None
    by_session = session_param is not None
    worker_names = [c for c in ((panel.worker_param if panel else None), *WORKER_COLUMNS) if c]
    if by_session and column in worker_names:
        raise InputError(
            path,
            f"column {column!r} holds participant ids, which anyone can type into a link; "
            f"this panel sends session ids ({session_param}), so confirm by the session "
            f"column (--column {session_param} or leave --column out)",
        )
    if column:
        candidates = [column]
    elif session_param is not None:
        candidates = [session_param, "session_id", "assignment_id"]
    else:
        candidates = [c for c in (panel.worker_param if panel else None, *ID_COLUMNS) if c]
    found = next((c for c in candidates if c in table.columns), None)
    if found is None:
        raise InputError(
            path,
            f"has no column {' or '.join(repr(c) for c in candidates)}; its columns are "
            f"{list(table.columns)} — name the id column with --column",
        )
    worker_column = next((c for c in worker_names if c in table.columns and c != found), None) if by_session else None
    seen: dict[str, str | None] = {}
    for i, value in enumerate(table[found]):
        value = value.strip()
        if value:
            worker = table[worker_column].iloc[i].strip() if worker_column else ""
            seen.setdefault(value, worker or None)
    return list(seen.items())


@dataclass
class ConfirmOutcome:
    """What ``hitkit confirm`` did: newly confirmed assignments, those confirmed before, and ids it
    could not use (no such worker or session; work not submitted in hitkit)."""

    confirmed: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    not_submitted: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    """Listed session ids whose row names another participant than the one who arrived with them."""

    def as_dict(self) -> dict[str, list[str]]:
        """The outcome as plain lists, for ``--json``."""
        return {
            "confirmed": self.confirmed,
            "already_confirmed": self.already,
            "unknown": self.unknown,
            "not_submitted": self.not_submitted,
            "mismatched": self.mismatched,
        }

    def describe(self) -> str:
        """One paragraph for the coordinator."""
        lines = [f"Confirmed {len(self.confirmed)} assignment(s); {len(self.already)} were confirmed already."]
        if self.not_submitted:
            lines.append(
                f"{len(self.not_submitted)} listed id(s) hold no submitted work in hitkit (not finished, "
                f"returned or expired here): {', '.join(self.not_submitted[:10])}"
                f"{' …' if len(self.not_submitted) > 10 else ''}"
            )
        if self.unknown:
            lines.append(
                f"{len(self.unknown)} listed id(s) match no worker or session of this study: "
                f"{', '.join(self.unknown[:10])}{' …' if len(self.unknown) > 10 else ''} — check that "
                f"the file is this study's completion list"
            )
        if self.mismatched:
            lines.append(
                f"{len(self.mismatched)} listed session id(s) arrived here with another participant id "
                f"than the list gives, so they were not confirmed: {', '.join(self.mismatched[:10])}"
                f"{' …' if len(self.mismatched) > 10 else ''}"
            )
        return "\n".join(lines)


def _chunks(items: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def confirm_completed(session: Session, ctx, ids: list[str] | list[Listed], source: str = "") -> ConfirmOutcome:
    """Confirm the study's finished work of every listed session (or worker) id, once (safe to repeat).

    Where the panel sends session ids (``session_param``), an id confirms only the assignment whose
    session id, stored at its first arrival, is that id — and, where the list gives the row's
    participant id, only if that participant is the one who arrived with it. A participant id alone
    confirms nothing there: it is typed into a URL, not given by the panel. Without session ids, a
    worker id confirms every finished assignment of that worker in the study. Work not submitted in
    hitkit is never confirmed by a list: there are no answers to count.
    """
    listed: dict[str, str | None] = {}
    for item in ids:
        key, worker = (item, None) if isinstance(item, str) else item
        listed.setdefault(key, worker)
    ids = list(listed)
    panel = ctx.config.provider.panel
    by_session = bool(panel and panel.session_param)
    outcome = ConfirmOutcome()
    now = utcnow()
    matched: set[str] = set()
    rows: list[Row[Assignment, str]] = []
    for chunk in _chunks(ids):
        match = (
            Assignment.provider_assignment_id.in_(chunk)
            if by_session
            else or_(Assignment.provider_assignment_id.in_(chunk), Worker.external_id.in_(chunk))
        )
        rows += session.execute(
            select(Assignment, Worker.external_id)
            .join(Hit, Assignment.hit_id == Hit.id)
            .join(Worker, Assignment.worker_id == Worker.id)
            .where(Hit.study_id == ctx.study_id, match)
            .order_by(Assignment.id)
            .with_for_update(of=Assignment)
        ).all()
    done_ids: set[str] = set()  # listed ids that matched finished work
    seen_assignments: set[int] = set()
    mismatched: set[str] = set()
    for a, worker_id in rows:
        if a.id in seen_assignments:
            continue
        seen_assignments.add(a.id)
        hits = {
            x
            for x in ((a.provider_assignment_id,) if by_session else (a.provider_assignment_id, worker_id))
            if x in listed
        }
        if by_session and any(listed[x] is not None and listed[x] != worker_id for x in hits):
            mismatched.update(hits)
            continue
        matched.update(hits)
        if a.status not in DONE_STATUSES:
            continue
        done_ids.update(hits)
        label = a.provider_assignment_id or str(a.id)
        if a.confirmed_at is not None:
            outcome.already.append(label)
        else:
            a.confirmed_at = now
            outcome.confirmed.append(label)
    outcome.mismatched = [i for i in ids if i in mismatched]
    outcome.unknown = [i for i in ids if i not in matched and i not in mismatched]
    outcome.not_submitted = [i for i in ids if i in matched and i not in done_ids]
    add_event(
        session,
        ctx.study_id,
        "work_confirmed",
        "cli",
        {
            "source": source[:200],
            "confirmed": len(outcome.confirmed),
            "already": len(outcome.already),
            "unknown": len(outcome.unknown),
            "not_submitted": len(outcome.not_submitted),
            "mismatched": len(outcome.mismatched),
        },
    )
    session.flush()
    return outcome
