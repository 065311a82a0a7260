"""shared state: what several server processes must agree on, in the database (issue 27)

- submissions.checks_done: the checks ended so far of a running submission (the progress
  a worker reported to any server process);
- submissions.leases_lost: gradings whose worker died or fell silent (the attempt limit);
- submissions.first_tried_at and refused_tries: a refusal near a deadline holds the
  student's time, so that trying again is not late;
- change_stamps: a counter per in-memory view, raised by the transaction that changed it;
- workers_seen: each remote worker's last word, for /metrics.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("checks_done", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("first_tried_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("leases_lost", sa.Integer(), nullable=False,
                                   server_default="0"))
    op.create_table(
        "refused_tries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False))
    op.create_index("ix_refused_tries_user_exercise", "refused_tries", ["user_id", "exercise"])
    op.create_table(
        "change_stamps",
        sa.Column("key", sa.String(80), primary_key=True),
        sa.Column("stamp", sa.Integer(), nullable=False))
    op.create_table(
        "workers_seen",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("healthy", sa.Boolean(), nullable=False))


def downgrade() -> None:
    op.drop_table("workers_seen")
    op.drop_table("change_stamps")
    op.drop_index("ix_refused_tries_user_exercise", "refused_tries")
    op.drop_table("refused_tries")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("leases_lost")
        batch.drop_column("first_tried_at")
        batch.drop_column("checks_done")
