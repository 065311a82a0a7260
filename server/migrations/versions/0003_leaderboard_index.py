"""an index that serves the leaderboard: graded, unflagged submissions of one exercise

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_submissions_board", "submissions",
                    ["exercise", "status", "flag", "user_id", "score"])


def downgrade() -> None:
    op.drop_index("ix_submissions_board", "submissions")
