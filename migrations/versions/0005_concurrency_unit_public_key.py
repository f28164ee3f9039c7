"""unit.public_key: the random key workers see instead of the unit's ordered id; conversation.reply_claim

Unit ids are made in creation order, and the QC slot and human–human material are created last,
so an id a worker could see would tell them which unit is which. Existing units get a key each.

conversation.reply_claim and reply_claimed_at: who is generating the reply a live chat owes, so
that concurrent retries make one bot call.

Revision ID: 0003_concurrency
Revises: 0003_mturk_panel
Create Date: 2026-11-25
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0003_concurrency"
down_revision = "0003_mturk_panel"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("unit") as batch_op:
        batch_op.add_column(sa.Column("public_key", sa.String(length=32), nullable=True))
    conn = op.get_bind()
    unit = sa.table("unit", sa.column("id", sa.Integer), sa.column("public_key", sa.String))
    for (unit_id,) in conn.execute(sa.select(unit.c.id)).all():
        conn.execute(unit.update().where(unit.c.id == unit_id).values(public_key=secrets.token_hex(8)))
    with op.batch_alter_table("unit") as batch_op:
        batch_op.alter_column("public_key", existing_type=sa.String(length=32), nullable=False)
        batch_op.create_unique_constraint("uq_unit_public_key", ["public_key"])
    with op.batch_alter_table("conversation") as batch_op:
        batch_op.add_column(sa.Column("reply_claim", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("reply_claimed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversation") as batch_op:
        batch_op.drop_column("reply_claimed_at")
        batch_op.drop_column("reply_claim")
    with op.batch_alter_table("unit") as batch_op:
        batch_op.drop_constraint("uq_unit_public_key", type_="unique")
        batch_op.drop_column("public_key")
