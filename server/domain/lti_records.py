"""What the LTI 1.3 side keeps (issue 40): the platforms (LMSs) registered, who each of their
users is here, the resource links (an LMS assignment and the exercise it is), the scores
owed to each link's line item, and the login's short-lived state, nonces and one-time entry
codes. The protocol itself is server/lti/."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import Mapped, mapped_column

from ..core.clock import utcnow
from .models import Base


class LtiPlatform(Base):
    """A registration: one LMS (issuer) and the client id it gave this tool."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    deployment_ids: Mapped[list] = mapped_column(JSON, default=list)
    auth_login_url: Mapped[str] = mapped_column(String(1000))
    auth_token_url: Mapped[str] = mapped_column(String(1000))
    key_set_url: Mapped[str] = mapped_column(String(1000))
    # the LMS's own web addresses, whose pages frame the launch (Content-Security-Policy
    # frame-ancestors of the launch page); the issuer's origin when none is given
    frame_origins: Mapped[list] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LtiIdentity(Base):
    """An LMS user (issuer, sub) is one user here, made at their first launch or roster pull."""

    __tablename__ = "lti_identities"
    __table_args__ = (UniqueConstraint("platform_id", "sub"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)


class LtiLink(Base):
    """A resource link: an LMS assignment (activity) and the exercise it is, with where its
    scores go (the AGS claim of its launches: the line item and the scopes granted)."""

    __tablename__ = "lti_links"
    __table_args__ = (UniqueConstraint("platform_id", "deployment_id", "resource_link_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    deployment_id: Mapped[str] = mapped_column(String(255))
    resource_link_id: Mapped[str] = mapped_column(String(255))
    context_id: Mapped[str] = mapped_column(String(255), default="")
    context_title: Mapped[str] = mapped_column(String(255), default="")
    exercise: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(255), default="")
    ags: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    nrps_url: Mapped[str] = mapped_column(String(1000), default="")


class LtiScore(Base):
    """What a link's line item should show for one student, and what it was last sent: the
    outbox of grades back. Written in the transaction that changed the score (stored before
    sent); sent, retried with backoff while the LMS is away, and never twice for one score."""

    __tablename__ = "lti_scores"
    __table_args__ = (UniqueConstraint("link_id", "user_id"),
                      Index("ix_lti_scores_due", "state", "next_try_at"),
                      Index("ix_lti_scores_user_id", "user_id"))  # every commit's look-up

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    link_id: Mapped[int] = mapped_column(ForeignKey("lti_links.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    sub: Mapped[str] = mapped_column(String(255))  # the LMS's id of the student
    wanted: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: not yet scored
    sent: Mapped[float | None] = mapped_column(Float, nullable=True)
    # pending (to send), sent (the LMS has `wanted`), failed (refused for good: an admin looks)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    tries: Mapped[int] = mapped_column(Integer, default=0)
    next_try_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_error: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LtiKv(Base):
    """The OIDC login's state and nonces (pylti1p3's launch data storage), each until it
    expires; a nonce is deleted by the launch that uses it, so it serves once."""

    __tablename__ = "lti_kv"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[dict | list | str | bool | None] = mapped_column(JSON, nullable=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
