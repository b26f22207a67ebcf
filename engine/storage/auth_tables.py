"""SQLAlchemy mirror of schema.sql's users-and-permissions tables (sessions, login attempts, project
and resource grants, audit log), declared on engine.storage.tables' metadata."""

from __future__ import annotations

from sqlalchemy import (
    CHAR,
    TIMESTAMP,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    SmallInteger,
    String,
    Table,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from engine.storage.tables import metadata

_NOW = text("now()")

user_session = Table(
    "user_session",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("session_hash", CHAR(64), nullable=False, unique=True),
    Column("csrf_hash", CHAR(64), nullable=False),
    Column("client_addr", String(64)),
    Column("expire_time", TIMESTAMP(timezone=True), nullable=False),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
)

login_attempt = Table(
    "login_attempt",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_name", String(64), nullable=False),
    Column("client_addr", String(64), nullable=False),
    Column("success", Boolean, nullable=False),
    Column("attempt_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", BigInteger),
    Column("user_name", String(64)),
    Column("client_addr", String(64)),
    Column("action", String(32), nullable=False),
    Column("resource_type", String(32), nullable=False),
    Column("resource", String(255)),
    Column("project_code", BigInteger),
    Column("status", SmallInteger, nullable=False),
    Column("detail", JSONB),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
)

project_user = Table(
    "project_user",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, ForeignKey("project.code", ondelete="CASCADE"), nullable=False),
    Column("user_id", BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("perm", SmallInteger, nullable=False),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
    UniqueConstraint("project_code", "user_id"),
    CheckConstraint("perm BETWEEN 1 AND 7"),
)

resource_grant = Table(
    "resource_grant",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("resource_type", String(32), nullable=False),
    Column("resource_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, ForeignKey("users.id", ondelete="CASCADE")),
    Column("project_code", BigInteger, ForeignKey("project.code", ondelete="CASCADE")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
    CheckConstraint(
        "resource_type IN ('datasource', 'alert_group', 'tenant', 'environment')",
        name="resource_grant_resource_type_check",
    ),
    CheckConstraint("(user_id IS NULL) <> (project_code IS NULL)"),
)

Index("login_attempt_user_idx", login_attempt.c.user_name, login_attempt.c.attempt_time)
Index("login_attempt_addr_idx", login_attempt.c.client_addr, login_attempt.c.attempt_time)
Index("audit_log_time_idx", audit_log.c.create_time)
Index("project_user_user_idx", project_user.c.user_id)
Index(
    "resource_grant_user_idx",
    resource_grant.c.resource_type,
    resource_grant.c.resource_id,
    resource_grant.c.user_id,
    unique=True,
    postgresql_where=text("user_id IS NOT NULL"),
)
Index(
    "resource_grant_project_idx",
    resource_grant.c.resource_type,
    resource_grant.c.resource_id,
    resource_grant.c.project_code,
    unique=True,
    postgresql_where=text("project_code IS NOT NULL"),
)
