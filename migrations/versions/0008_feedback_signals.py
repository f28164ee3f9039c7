"""assignment.feedback_signals: how the worker's comment on the whole HIT was entered

The same counts and timings as turn.signals and response.signals (never a key's content), checked
and bounded by hitkit.worker.authenticity.clean_signals. Null without a comment, when no page watched the
comment box, and for everything stored before this revision.

Revision ID: 0008_feedback_signals
Revises: 0007_authenticity
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_feedback_signals"
down_revision = "0007_authenticity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assignment") as batch_op:
        batch_op.add_column(sa.Column("feedback_signals", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assignment") as batch_op:
        batch_op.drop_column("feedback_signals")
