"""LTI 1.3: platforms, identities, resource links, the scores owed, the login's state (issue 40)

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("issuer", sa.String(255), nullable=False),
        sa.Column("client_id", sa.String(255), nullable=False),
        sa.Column("deployment_ids", sa.JSON(), nullable=False),
        sa.Column("auth_login_url", sa.String(1000), nullable=False),
        sa.Column("auth_token_url", sa.String(1000), nullable=False),
        sa.Column("key_set_url", sa.String(1000), nullable=False),
        sa.Column("frame_origins", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("issuer", "client_id"))
    op.create_table(
        "lti_identities",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("platform_id", sa.Integer(), sa.ForeignKey("lti_platforms.id"), nullable=False),
        sa.Column("sub", sa.String(255), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.UniqueConstraint("platform_id", "sub"))
    op.create_index("ix_lti_identities_user_id", "lti_identities", ["user_id"])
    op.create_table(
        "lti_links",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("platform_id", sa.Integer(), sa.ForeignKey("lti_platforms.id"), nullable=False),
        sa.Column("deployment_id", sa.String(255), nullable=False),
        sa.Column("resource_link_id", sa.String(255), nullable=False),
        sa.Column("context_id", sa.String(255), nullable=False),
        sa.Column("context_title", sa.String(255), nullable=False),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("ags", sa.JSON(), nullable=True),
        sa.Column("nrps_url", sa.String(1000), nullable=False),
        sa.UniqueConstraint("platform_id", "deployment_id", "resource_link_id"))
    op.create_table(
        "lti_scores",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("link_id", sa.Integer(), sa.ForeignKey("lti_links.id"), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("sub", sa.String(255), nullable=False),
        sa.Column("wanted", sa.Float(), nullable=True),
        sa.Column("sent", sa.Float(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("link_id", "user_id"))
    op.create_index("ix_lti_scores_due", "lti_scores", ["state", "next_try_at"])
    op.create_index("ix_lti_scores_user_id", "lti_scores", ["user_id"])
    op.create_table(
        "lti_kv",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False))
    op.create_index("ix_lti_kv_expires_at", "lti_kv", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_lti_kv_expires_at", "lti_kv")
    op.drop_table("lti_kv")
    op.drop_index("ix_lti_scores_user_id", "lti_scores")
    op.drop_index("ix_lti_scores_due", "lti_scores")
    op.drop_table("lti_scores")
    op.drop_table("lti_links")
    op.drop_index("ix_lti_identities_user_id", "lti_identities")
    op.drop_table("lti_identities")
    op.drop_table("lti_platforms")
