"""turn.first_token_ms and turn.reply_ms: how long a streamed bot reply took, per turn

Milliseconds from the moment hitkit asked the bot to its first piece of text (what the worker waited
before anything appeared) and to the whole reply. A reply that is not streamed (a bot that cannot, or
a page that did not ask) arrives whole, so both are about the same. Null for worker turns, for material that was not chatted
live, and for everything stored before this revision. The arena protocol (two systems side by side)
needs no table of its own: a battle is a unit, each side a conversation, the vote a response.

Revision ID: 0011_arena_streaming
Revises: 0010_prolific_hooks
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_arena_streaming"
down_revision = "0010_prolific_hooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turn") as batch_op:
        batch_op.add_column(sa.Column("first_token_ms", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("reply_ms", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turn") as batch_op:
        batch_op.drop_column("reply_ms")
        batch_op.drop_column("first_token_ms")
