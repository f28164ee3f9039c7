"""hook_subscription and hook_event: a platform's webhooks, subscribed and received

``hook_subscription`` remembers each webhook subscription hitkit made for a study (the platform's id,
the event type, the target address, the workspace's signing secret the deliveries are checked with)
and whether it was confirmed or deleted. ``hook_event`` is the queue of deliveries that passed the
signature check: one row per platform event id (a second delivery of the same event finds its row),
drained by the scheduler, which asks the platform for the current state before acting on any of them.

Screened-out assignments need no column: their status is ``screened_out`` and their pay a ``payment``
row of kind ``screen_out``.

Revision ID: 0010_prolific_hooks
Revises: 0009_study_lease_payment_states
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_prolific_hooks"
down_revision = "0009_study_lease_payment_states"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hook_subscription",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("study.id"), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("remote_id", sa.String(128), nullable=True),
        sa.Column("target_url", sa.String(512), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("study_id", "event_type", name="uq_hook_subscription_study_event"),
    )
    op.create_table(
        "hook_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("study.id"), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("resource_id", sa.String(128), nullable=False),
        sa.Column("sent_at", sa.String(64), nullable=True),
        sa.Column("body", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("study_id", "provider", "event_id", name="uq_hook_event_once"),
        sa.Index("ix_hook_event_study_status", "study_id", "status"),
    )


def downgrade() -> None:
    # The version table stays widened: a later revision id may be as long.
    op.drop_table("hook_event")
    op.drop_table("hook_subscription")
