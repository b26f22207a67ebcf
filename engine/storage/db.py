"""Engine and pool factories for the metadata database."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine.config import DatabaseConfig


def sqlalchemy_url(dsn: str) -> str:
    """asyncpg DSN -> SQLAlchemy URL for the asyncpg dialect."""
    for prefix in ("postgresql://", "postgres://"):
        if dsn.startswith(prefix):
            return "postgresql+asyncpg://" + dsn[len(prefix) :]
    return dsn


def create_engine(cfg: DatabaseConfig) -> AsyncEngine:
    return create_async_engine(
        sqlalchemy_url(cfg.url()),
        pool_size=max(cfg.pool_min, 1),
        max_overflow=max(cfg.pool_max - cfg.pool_min, 0),
        pool_pre_ping=True,
        connect_args={"timeout": cfg.connect_timeout, "command_timeout": cfg.command_timeout},
    )
