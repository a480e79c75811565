"""walletcore_sql: the SQLAlchemy 2 (async) Repo adapter, SQLite by default or PostgreSQL,
with its Alembic migrations (`walletcore_sql.migrate`)."""

from walletcore_sql.repo import SqlRepo, build

__all__ = ["SqlRepo", "build"]
