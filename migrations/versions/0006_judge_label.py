"""judge_label: an LLM judge's labels of a study's material, one row per unit key and variant

Revision ID: 0006_judge
Revises: 0003_concurrency
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_judge"
down_revision = "0003_concurrency"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_label",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("unit_key", sa.String(length=200), nullable=False),
        sa.Column("variant", sa.String(length=16), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=32), nullable=True),
        sa.Column("parsed", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("study_id", "unit_key", "variant"),
    )


def downgrade() -> None:
    op.drop_table("judge_label")
