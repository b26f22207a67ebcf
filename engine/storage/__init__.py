"""Metadata storage: PostgreSQL through SQLAlchemy Core on asyncpg. The tables (tables.py) define the
schema; schema.sql is generated from them; migrations/ take existing databases from version to version."""
