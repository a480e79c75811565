"""procrastinate's tables, created by the first worker that finds none (idempotent).

Two workers starting together queue on an advisory lock; the second finds the tables and
does nothing. An upgrade of procrastinate that changes its schema needs its migrations
(`procrastinate schema --migrations`, docs/operations.md): this only creates.
"""

from __future__ import annotations

from typing import Any

from procrastinate import App
from procrastinate.schema import SchemaManager

#: The advisory lock key of the creation (any constant; per database).
_LOCK = 0x77636A6F6273  # "wcjobs"


async def ensure_schema(app: App) -> bool:
    """Create procrastinate's schema unless its table is there; True when created. The app
    must be open (`async with app.open_async():`)."""
    connector: Any = app.connector
    async with connector.pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        found = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        if found is not None and found[0] is not None:
            return False
        await conn.execute(SchemaManager.get_schema())
        return True


__all__ = ["ensure_schema"]
