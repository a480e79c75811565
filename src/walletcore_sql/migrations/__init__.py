"""Alembic migrations of walletcore_sql (a package, so wheels carry them)."""
