"""Whether a `walletcore worker` is alive: the readiness check `jobs` of the HTTP processes of
a deployment whose jobs run on procrastinate (entry point `walletcore.job_monitors:
procrastinate`).

An HTTP process on PostgreSQL runs no job: it serves the prices a worker stored. Without a
worker nothing refreshes them (`/prices` serves zeros, quotes answer 502), no trade settles
unless polled and no send is followed; readiness then says why. A worker is alive when
procrastinate's `procrastinate_workers` holds a heartbeat younger than `alive_seconds`
(procrastinate's workers beat every few seconds; the jobs of one silent that long are
taken over, `walletcore_jobs.app`).
"""

from __future__ import annotations

from typing import Any

import psycopg

from walletcore.ports import CheckFailed
from walletcore_jobs.urls import libpq_url

#: A heartbeat younger than this counts as a live worker (the stalled-job threshold).
ALIVE_SECONDS = 30.0
NEVER_STARTED = (
    "no worker: no `walletcore worker` has ever run on this database; prices are not "
    "refreshed, trades not settled, sends not followed"
)
NONE_ALIVE = (
    "no worker: no `walletcore worker` sent a heartbeat in the last {seconds:g} s; prices "
    "are not refreshed, trades not settled, sends not followed"
)

_KNOWN = "SELECT to_regclass('procrastinate_workers') IS NOT NULL"
_ALIVE = (
    "SELECT count(*) FROM procrastinate_workers "
    "WHERE last_heartbeat > now() - make_interval(secs => %s)"
)


class WorkerMonitor:
    """`walletcore.ports.HealthCheck`: one short connection per check (readiness probes run
    at most once a second per process), so nothing is held between checks."""

    def __init__(
        self,
        database_url: str,
        *,
        alive_seconds: float = ALIVE_SECONDS,
        schema: str | None = None,
    ) -> None:
        self._conninfo = libpq_url(database_url)
        self.alive_seconds = alive_seconds
        #: the search_path of its connections (tests), as `walletcore_jobs.app.connector`'s
        self._options: dict[str, Any] = (
            {} if schema is None else {"options": f"-c search_path={schema}"}
        )

    def __repr__(self) -> str:  # never the URL: it carries the database's password
        return f"WorkerMonitor(alive_seconds={self.alive_seconds})"

    async def alive(self) -> int | None:
        """How many workers beat within `alive_seconds`; None when none ever started."""
        async with await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, **self._options
        ) as conn:
            known = await (await conn.execute(_KNOWN)).fetchone()
            if known is None or not known[0]:  # procrastinate's tables: made by a worker
                return None
            row = await (await conn.execute(_ALIVE, (self.alive_seconds,))).fetchone()
        return 0 if row is None else int(row[0])

    async def check(self) -> None:
        alive = await self.alive()
        if alive is None:
            raise CheckFailed(NEVER_STARTED)
        if alive == 0:
            raise CheckFailed(NONE_ALIVE.format(seconds=self.alive_seconds))


def build(*, settings: Any, **_: Any) -> WorkerMonitor:
    """The entry point's factory: the deployment's database (`WALLETCORE_DATABASE_URL`)."""
    if settings.database_url is None:
        raise ValueError("the procrastinate engine needs WALLETCORE_DATABASE_URL (PostgreSQL)")
    return WorkerMonitor(settings.database_url.get_secret_value())


__all__ = ["ALIVE_SECONDS", "NEVER_STARTED", "NONE_ALIVE", "WorkerMonitor", "build"]
