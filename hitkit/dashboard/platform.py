"""What the dashboard shows of the platform's side of a study: webhook health (last event, failures, refused
deliveries by cause, or "polling only"), a high return rate, and the screener's screen-outs. Reads rows only; never asks the platform."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Payment
from hitkit.running import hooks
from hitkit.running.hook_refusals import health_line
from hitkit.worker import screener


def platform_state(session: Session, ctx) -> dict[str, Any] | None:
    """The platform panel of one study, or None where there is nothing to show (no webhooks, no screener)."""
    has_hooks = getattr(ctx.provider, "hooks", None) is not None
    if not has_hooks and ctx.config.screener is None:
        return None
    out: dict[str, Any] = {}
    if has_hooks:
        health = hooks.health(session, ctx.study_id)
        out["webhooks"] = health
        out["webhooks_text"] = health_line(health)
    if ctx.config.screener is not None:
        screened = screener.screened_out_count(session, ctx.study_id)
        paid = session.scalar(
            select(func.coalesce(func.sum(Payment.amount), 0)).where(
                Payment.study_id == ctx.study_id, Payment.kind == "screen_out"
            )
        )
        out["screened_out"] = screened
        out["screened_out_text"] = (
            f"{screened} of {ctx.config.screener.slots} slots ({paid} {ctx.config.provider.currency})"
        )
    return out
