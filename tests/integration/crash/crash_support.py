"""Helpers of the kill -9 tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

from dataclasses import dataclass

from walletcore_sql.storage import SqlStorage


@dataclass(frozen=True)
class Store:
    """A database: `url`, plus the schema to use on PostgreSQL."""

    kind: str
    url: str
    schema: str | None = None

    def storage(self, *, migrate: bool = False) -> SqlStorage:
        return SqlStorage(self.url, migrate=migrate, schema=self.schema)
