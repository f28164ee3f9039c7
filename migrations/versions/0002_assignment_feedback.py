"""assignment.feedback: the worker's optional comment on the whole HIT

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assignment") as batch_op:
        batch_op.add_column(sa.Column("feedback", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assignment") as batch_op:
        batch_op.drop_column("feedback")
