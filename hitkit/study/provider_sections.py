"""The study file's ``provider:`` section: which crowd platform posts the work (simulated, local, Prolific,
MTurk archives, a URL-parameter panel) and each platform's own settings. Part of the shared sections
(:mod:`hitkit.study.sections`); checks that need a platform's rules run in :mod:`hitkit.study.config`."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from hitkit.i18n import N_
from hitkit.study.sections import Model


class ProlificConfig(Model):
    """Prolific (REST API v1). The API token is read from the environment, never from the study file."""

    api_url: str = "https://api.prolific.com/api/v1"
    token_env: str = Field("PROLIFIC_TOKEN", description="environment variable holding the API token")
    project: Optional[str] = Field(None, description="Prolific project id the study is created in")
    workspace: Optional[str] = Field(None, description="workspace whose balance pays (default: your only one)")
    estimated_minutes: int = Field(10, gt=0, le=600)
    device_compatibility: list[str] = Field(default_factory=lambda: ["desktop"])
    filters: list[dict[str, Any]] = Field(default_factory=list, description="eligibility filters, passed through")
    blocklist_group: Optional[str] = Field(None, description="participant group used as a blocklist for the cap")
    # Prolific's service fee is about 33.3 % of rewards and bonuses, plus VAT on that fee where it applies
    # (help centre, "Bonus payments"; PLATFORMS.md). Set vat_rate 0 where no VAT is charged.
    service_fee_rate: Decimal = Field(Decimal("0.333"), ge=0, le=1, description="Prolific's fee on rewards/bonuses")
    vat_rate: Decimal = Field(Decimal("0.20"), ge=0, le=1, description="VAT charged on Prolific's fee")
    complete_after_s: float = Field(
        600,
        ge=0,
        description="work submitted in hitkit but still ACTIVE on Prolific this long is completed "
        "through Prolific's COMPLETE transition",
    )
    webhook_url: Optional[str] = Field(
        None,
        description=(
            "public https:// address of the worker-facing server; when set, Prolific's webhooks are subscribed "
            "(docs/PROLIFIC.md); without it hitkit polls"
        ),
    )
    on_high_return_rate: Literal["pause", "warn"] = "warn"
    allowlist: Optional[str] = Field(None, description="name of a participant group: only its members may take part")
    qc_failures_blocklist: Optional[str] = Field(
        None,
        description=("name of a participant group that workers who fail QC join, and that every study using it blocks"),
    )
    rejection_category: str = "LOW_EFFORT"
    rejection_message: Optional[str] = Field(
        None,
        description=(
            "the message a rejected participant reads (100+ characters once filled in); may name {study} and {reason}"
        ),
    )


class MTurkConfig(Model):
    """Amazon Mechanical Turk (boto3). Credentials come from the usual AWS environment/config."""

    sandbox: bool = True
    region: str = "us-east-1"
    endpoint_url: Optional[str] = Field(
        None,
        description=(
            "a service that speaks MTurk's API (MTurk itself closed on 2026-09-30; without this, posting is refused)"
        ),
    )
    frame_height: int = Field(800, ge=0, le=10_000)
    locales: list[str] = Field(default_factory=list, description="worker countries, e.g. [US, GB]")
    min_approval_rate: Optional[int] = Field(None, ge=0, le=100)
    min_approved_hits: Optional[int] = Field(None, ge=0)
    masters: bool = False
    auto_approval_delay_s: int = Field(3 * 24 * 3600, ge=0, le=30 * 24 * 3600)


PANEL_PLACEHOLDERS = ("code", "session_id")
"""What a panel's completion URL template may name: ``{code}`` and ``{session_id}``."""


class PanelConfig(Model):
    """A panel that sends participants to a URL with their id in query parameters and takes them back
    with a completion code or redirect (CloudResearch Connect, SONA, a university pool, generic).

    Participants arrive at ``/s/STUDY/enter?WORKER_PARAM=ID[&SESSION_PARAM=ID]``; hitkit chooses the
    HIT. Their work counts once the coordinator confirms it with the panel's completion list
    (``hitkit confirm STUDY_FILE --completed FILE.csv``); until then it is exported as
    ``unconfirmed`` and neither approved nor analysed. The panel pays; hitkit keeps the ledger.
    """

    name: str = Field(
        "panel",
        min_length=1,
        max_length=64,
        description="the panel's name, shown to coordinators (e.g. CloudResearch Connect)",
    )
    worker_param: str = Field(
        "participantId", pattern=r"^[A-Za-z0-9_.\-]{1,64}$", description="query parameter carrying the participant's id"
    )
    session_param: Optional[str] = Field(
        None,
        pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
        description=("query parameter carrying the panel's id of this visit (assignment/session), when it sends one"),
    )
    completion_url: Optional[str] = Field(
        None, description=("where a participant who submitted is sent; may contain {code} and {session_id}")
    )
    completion_code: Optional[str] = Field(
        None, pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="code shown (or put into {code}) on completion"
    )

    @model_validator(mode="after")
    def _hand_back(self) -> "PanelConfig":
        if self.completion_url is None and self.completion_code is None:
            raise ValueError(
                "a panel needs completion_url, completion_code or both, so participants can show "
                "the panel they finished; copy them from the panel's study settings"
            )
        if self.session_param is not None and self.session_param == self.worker_param:
            raise ValueError("session_param must differ from worker_param")
        if self.completion_url is not None:
            if not re.match(r"^https?://[^\s/]+", self.completion_url):
                raise ValueError(f"completion_url {self.completion_url!r} must be an http(s):// address")
            names = re.findall(r"{([^{}]*)}", self.completion_url)
            unknown = [n for n in names if n not in PANEL_PLACEHOLDERS]
            if unknown:
                raise ValueError(
                    f"completion_url names {{{unknown[0]}}}; it may name only "
                    f"{', '.join('{' + n + '}' for n in PANEL_PLACEHOLDERS)}"
                )
            if "code" in names and self.completion_code is None:
                raise ValueError("completion_url names {code} but completion_code is not set")
            if "session_id" in names and self.session_param is None:
                raise ValueError("completion_url names {session_id} but session_param is not set")
        return self


WORK_WORDS = {
    "prolific": N_("study"),
    "panel": N_("task"),
    "local": N_("task"),
    "mturk": N_("HIT"),
    "simulated": N_("HIT"),
}
"""Each platform's own word for one piece of work, shown on worker pages (:attr:`ProviderConfig.work_word`)."""


class ProviderConfig(Model):
    """Which crowd does the work."""

    kind: Literal["simulated", "local", "prolific", "mturk", "panel"] = "simulated"
    currency: str = "USD"
    fee_rate: Decimal = Field(Decimal("0"), ge=0, le=1, description="provider fee on rewards")
    prolific: ProlificConfig = Field(default_factory=ProlificConfig)
    mturk: MTurkConfig = Field(default_factory=MTurkConfig)
    panel: Optional[PanelConfig] = None

    @property
    def work_word(self) -> str:
        """What the study's platform calls one piece of work, as worker pages name it: Prolific's participants
        take a "study", a panel's and local annotators a "task", MTurk's workers (and the simulated crowd,
        which arrives as they did) a "HIT"."""
        return WORK_WORDS[self.kind]

    @model_validator(mode="after")
    def _panel_section(self) -> "ProviderConfig":
        if self.kind == "panel" and self.panel is None:
            raise ValueError(
                "provider.kind 'panel' needs a provider.panel section: worker_param and "
                "completion_url and/or completion_code (see docs/howto/panels.md)"
            )
        return self
