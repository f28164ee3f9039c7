"""assignment.confirmed_at (work a platform confirmed) and study.uid (a random id per study and database)

Revision ID: 0003_mturk_panel
Revises: 0003_hardening
Create Date: 2026-11-25
"""

import datetime as dt
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0003_mturk_panel"
down_revision = "0003_hardening"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD/DROP COLUMN (SQLite >= 3.35 and PostgreSQL): a batch rebuild of study would drop a table
    # that others reference, which SQLite's foreign keys refuse.
    op.add_column("assignment", sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("study", sa.Column("uid", sa.String(32), nullable=True))
    conn = op.get_bind()
    # Work done before this revision: the providers that verify arrivals confirmed it then; on MTurk
    # the scheduler approved only work MTurk showed as the worker's, so approved MTurk work is
    # confirmed and submitted MTurk work waits, as it would from now on.
    now = dt.datetime.now(dt.timezone.utc)
    conn.execute(
        sa.text(
            "UPDATE assignment SET confirmed_at = :now WHERE status = 'approved' OR (status = 'submitted' AND hit_id IN "
            "(SELECT hit.id FROM hit JOIN study ON hit.study_id = study.id WHERE study.provider <> 'mturk'))"
        ),
        {"now": now},
    )
    for (study_id,) in conn.execute(sa.text("SELECT id FROM study")).fetchall():
        conn.execute(
            sa.text("UPDATE study SET uid = :uid WHERE id = :id"), {"uid": secrets.token_hex(16), "id": study_id}
        )
    # uid stays nullable in the schema (making it NOT NULL would rebuild study on SQLite); every row has
    # one, new studies get one from the model, and a provider refuses to make tokens without it.


def downgrade() -> None:
    op.execute("ALTER TABLE study DROP COLUMN uid")
    op.execute("ALTER TABLE assignment DROP COLUMN confirmed_at")
