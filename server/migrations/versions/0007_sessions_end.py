"""sessions end: each keeps the hash of the API token it was made with; created_at indexed

A session counts only while its user's token is still the one it was made with (server/
auth.py). Sessions made before this revision have none, so they end: their browsers sign in
once more.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("web_sessions") as table:
        table.add_column(sa.Column("user_token_hash", sa.String(64), nullable=True))
    op.create_index("ix_web_sessions_created_at", "web_sessions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_web_sessions_created_at", "web_sessions")
    with op.batch_alter_table("web_sessions") as table:
        table.drop_column("user_token_hash")
