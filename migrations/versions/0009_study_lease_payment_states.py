"""study_lease: one leader per study; payment.state: where each payment stands on the platform

``study_lease`` holds the one process that may act on a platform or on money for a study (see
hitkit.study.lease). ``payment.state`` moves planned → created → sending → paid → confirmed (or
failed); rows written before this revision get the state their status implies: paid ones ``paid``,
failed ones ``failed``, pending ones ``planned`` (a pending bonus whose pay call may have gone out is
still settled from the platform's record, see hitkit.money.payments).

Revision ID: 0009_study_lease_payment_states
Revises: 0008_feedback_signals
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_study_lease_payment_states"
down_revision = "0008_feedback_signals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "study_lease",
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("study.id"), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("host", sa.String(128), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("ttl_s", sa.Float(), nullable=False),
        sa.Column("wanted_by", sa.String(128), nullable=True),
        sa.Column("wanted_until", sa.DateTime(timezone=True), nullable=True),
    )
    with op.batch_alter_table("payment") as batch_op:
        batch_op.add_column(sa.Column("state", sa.String(16), nullable=True))
        batch_op.add_column(sa.Column("state_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE payment SET state = CASE status WHEN 'paid' THEN 'paid' WHEN 'failed' THEN 'failed' ELSE 'planned' END"
    )


def downgrade() -> None:
    with op.batch_alter_table("payment") as batch_op:
        batch_op.drop_column("state_at")
        batch_op.drop_column("state")
    op.drop_table("study_lease")
