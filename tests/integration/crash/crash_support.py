"""Helpers of the kill -9 tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from walletcore.sandbox.filerepo import FileRepo
from walletcore_sql.repo import SqlRepo


@dataclass(frozen=True)
class Store:
    """A store: the sandbox's JSON file (`url` is its path), or a database (`url`, plus
    the schema to use on PostgreSQL)."""

    kind: str
    url: str
    schema: str | None = None

    def repo(self, *, migrate: bool = False) -> Any:
        """A FileRepo or a SqlRepo (both have `aclose`)."""
        if self.kind == "file":
            return ClosingFileRepo(Path(self.url))
        return SqlRepo(self.url, migrate=migrate, schema=self.schema)


class ClosingFileRepo(FileRepo):
    """The file repo, with the `aclose` of the SQL one (it holds nothing to close)."""

    async def aclose(self) -> None:
        return None
