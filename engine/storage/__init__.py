"""Metadata storage: PostgreSQL through SQLAlchemy Core on asyncpg. schema.sql is the DDL truth."""
