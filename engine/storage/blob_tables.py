"""SQLAlchemy mirror of schema.sql's blob and resource-center tables, declared on engine.storage.tables'
metadata: file contents stored in the metadata database (engine/storage/blobs.py) in 1 MiB rows, and the
versioned resource files of each project (engine/resources/)."""

from __future__ import annotations

from sqlalchemy import (
    CHAR,
    TIMESTAMP,
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    UniqueConstraint,
    text,
)

from engine.storage.tables import metadata

_NOW = text("now()")

#: one stored object of the database blob store; its chunks reference it by id, so a key written again
#: gets a new id and a reader of the old one never mixes the two
blob = Table(
    "blob",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("key", String(1024), nullable=False, unique=True),
    Column("size", BigInteger, nullable=False),
    Column("sha256", CHAR(64), nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
)

blob_chunk = Table(
    "blob_chunk",
    metadata,
    Column("blob_id", BigInteger, ForeignKey("blob.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

#: one version of one file of a project's resource center (DolphinScheduler's t_ds_resources, versioned):
#: every upload of a path adds a version; the content lives in the blob store under ``blob_key``
resource = Table(
    "resource",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, ForeignKey("project.code", ondelete="CASCADE"), nullable=False),
    Column("full_name", String(512), nullable=False),
    Column("version", Integer, CheckConstraint("version >= 1"), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("sha256", CHAR(64), nullable=False),
    Column("blob_key", String(1024), nullable=False),
    Column("description", String(1024)),
    Column("restored_from", Integer),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=_NOW),
    UniqueConstraint("project_code", "full_name", "version"),
)

#: which resource versions a saved workflow version's tasks use (``version`` NULL: the latest at run time)
resource_reference = Table(
    "resource_reference",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, ForeignKey("project.code", ondelete="CASCADE"), nullable=False),
    Column("full_name", String(512), nullable=False),
    Column("version", Integer),
    Column("workflow_code", BigInteger, nullable=False),
    Column("workflow_version", Integer, nullable=False),
    Column("task_code", BigInteger, nullable=False),
)

Index("resource_reference_name", resource_reference.c.project_code, resource_reference.c.full_name)
Index("resource_reference_workflow", resource_reference.c.workflow_code, resource_reference.c.workflow_version)
