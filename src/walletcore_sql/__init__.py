"""walletcore_sql: the SQLAlchemy 2 (async) Storage adapter, SQLite by default or PostgreSQL,
with its nonce leases and Alembic migrations (`walletcore_sql.migrate`)."""

from walletcore_sql.storage import SqlStorage, build

__all__ = ["SqlStorage", "build"]
