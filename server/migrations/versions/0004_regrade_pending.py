"""regrades wait beside new work: the old grade stays until the new one exists

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("regrade_pending", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    op.create_index("ix_submissions_regrade", "submissions", ["regrade_pending", "status"])


def downgrade() -> None:
    op.drop_index("ix_submissions_regrade", "submissions")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("regrade_pending")
