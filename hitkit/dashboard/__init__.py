"""The coordinator dashboard's logic as plain functions: what a study's progress is, what its
conversations, systems and bots look like, and the coordinator's actions on workers, each through the
provider and the ledger.

``server/dashboard.py`` is the thin HTTP layer over this package (``server/dashboard_login.py`` and
``server/auth.py`` the login); nothing here knows about Flask. The package's modules: :mod:`~hitkit.dashboard.progress`,
:mod:`~hitkit.dashboard.workers` (rows and actions), :mod:`~hitkit.dashboard.browse` (conversations,
profiles, side by side, events) and :mod:`~hitkit.dashboard.bots` (bot health); the protocol-specific
views come from each protocol's ``views.py``.
"""

from hitkit.dashboard.bots import BOT_TROUBLE, OWED_FAILING_S, RECENT_S, BotRow, bot_health, fmt_seconds
from hitkit.dashboard.browse import (
    Page,
    automatic_metrics,
    conversation_detail,
    conversations,
    event_json,
    events,
    side_by_side,
    studies,
    system_profile,
)
from hitkit.dashboard.progress import (
    StudyProgress,
    StudyShape,
    SystemProgress,
    study_progress,
    study_shape,
    unit_systems,
)
from hitkit.dashboard.workers import (
    ACTOR,
    ActionError,
    WorkerRow,
    approve_assignment,
    block_worker,
    bonus_worker,
    parse_amount,
    reject_assignment,
    unblock_worker,
    worker_rows,
)
from hitkit.money.qc import QcSummary, qc_summary

__all__ = [
    "ACTOR",
    "BOT_TROUBLE",
    "OWED_FAILING_S",
    "RECENT_S",
    "ActionError",
    "BotRow",
    "Page",
    "QcSummary",
    "StudyProgress",
    "StudyShape",
    "SystemProgress",
    "WorkerRow",
    "approve_assignment",
    "automatic_metrics",
    "block_worker",
    "bonus_worker",
    "bot_health",
    "conversation_detail",
    "conversations",
    "event_json",
    "events",
    "fmt_seconds",
    "parse_amount",
    "qc_summary",
    "reject_assignment",
    "side_by_side",
    "studies",
    "study_progress",
    "study_shape",
    "system_profile",
    "unblock_worker",
    "unit_systems",
    "worker_rows",
]
