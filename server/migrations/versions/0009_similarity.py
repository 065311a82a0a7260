"""similarity reports: an exercise's submissions compared pair by pair (issue 30)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "similarity_reports",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.Column("message", sa.String(500), nullable=False),
        sa.Column("pairs", sa.JSON(), nullable=True))
    op.create_index("ix_similarity_reports_exercise", "similarity_reports", ["exercise", "id"])


def downgrade() -> None:
    op.drop_index("ix_similarity_reports_exercise", "similarity_reports")
    op.drop_table("similarity_reports")
