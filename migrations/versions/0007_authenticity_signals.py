"""turn.signals and response.signals: how a worker's message or free-text answer was entered

Counts and timings only (keystrokes, typed, composed and pasted characters, intervals, focus
changes), never a key's content; checked and bounded by hitkit.worker.authenticity.clean_signals. Null
for bot turns, for answers no page watched, and for everything stored before this revision.

Revision ID: 0007_authenticity
Revises: 0006_judge
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_authenticity"
down_revision = "0006_judge"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch_op:
        batch_op.add_column(sa.Column("signals", sa.JSON(), nullable=True))
    with op.batch_alter_table("response") as batch_op:
        batch_op.add_column(sa.Column("signals", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("response") as batch_op:
        batch_op.drop_column("signals")
    with op.batch_alter_table("turn") as batch_op:
        batch_op.drop_column("signals")
