"""The procrastinate `App` of a deployment: its jobs (walletcore.jobs) as periodic tasks on
the deployment's PostgreSQL, shared by every `walletcore worker` process.

Once-only, across any number of workers on any number of machines:
- each period of a periodic task is deferred once, as a rule: every worker's periodic
  deferrer tries, and procrastinate's `procrastinate_periodic_defers` (unique per task,
  periodic id and scheduled second) lets one insert win. That table keeps only the newest
  period, though: a worker whose deferrer is a whole period behind another's (a stalled
  or overloaded process) defers a period the other already did, so a period can run
  once per worker. The jobs are safe to run again (below), so that costs a repeated read;
- each task runs one job at a time (`lock`): a job of the same task waits while another
  is `doing`;
- a job left `doing` by a worker that died (no heartbeat for `stalled_seconds`) is put back
  to `todo` by the `retry_stalled` task (itself without a lock, so a worker killed while
  running it cannot stop the recovery), and runs again on a live worker. The jobs are safe
  to run again: the refresh skips a fresh table; a trade, and a send's chain status
  (`follow_sends`), move by compare-and-set, once;
- a run older than three periods (a backlog after an outage) is skipped: the next period
  does the same work.
Transient failures (storage, upstream prices, venue timeouts) are retried with
exponential backoff (2, 4, 8 s), up to 4 attempts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from procrastinate import App, PsycopgConnector, RetryStrategy
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException

from walletcore.container import Container
from walletcore.domain.errors import (
    PriceUnavailable,
    PricingTimeout,
    StorageUnavailable,
    VenueTimeout,
)
from walletcore_jobs.cron import every
from walletcore_jobs.urls import libpq_url

log = logging.getLogger("walletcore.jobs")

#: Failures worth another attempt soon: the next period would come anyway, but a refresh
#: every minute that failed should not wait a whole minute.
TRANSIENT: tuple[type[Exception], ...] = (
    StorageUnavailable,
    PriceUnavailable,
    PricingTimeout,
    VenueTimeout,
    TimeoutError,
    ConnectionError,
)
RETRY = RetryStrategy(max_attempts=4, exponential_wait=2, retry_exceptions=TRANSIENT)
#: How often a worker looks for jobs of dead workers.
STALLED_CHECK_SECONDS = 5.0


def connector(database_url: str, *, schema: str | None = None, pool_size: int = 4) -> Any:
    """A psycopg connector on the deployment's database (`WALLETCORE_DATABASE_URL`, in its
    SQLAlchemy form); `schema`: the search_path of its connections (tests)."""
    kwargs: dict[str, Any] = {}
    if schema is not None:
        kwargs["kwargs"] = {"options": f"-c search_path={schema}"}
    return PsycopgConnector(
        conninfo=libpq_url(database_url), min_size=1, max_size=pool_size, **kwargs
    )


def make_app(
    container: Container,
    *,
    schema: str | None = None,
    stalled_seconds: float = 30.0,
    stalled_check_seconds: float = STALLED_CHECK_SECONDS,
) -> App:
    """The App with the container's jobs as periodic tasks. `stalled_seconds`: a job whose
    worker sent no heartbeat for that long is run again (keep it above the workers'
    `update_heartbeat_interval`)."""
    settings = container.settings()
    if settings.database_url is None:
        raise ValueError("procrastinate needs WALLETCORE_DATABASE_URL (PostgreSQL)")
    app = App(connector=connector(settings.database_url.get_secret_value(), schema=schema))
    jobs = container.jobs()
    for job in jobs.periodic():
        _periodic(app, job.name, job.every_seconds, job.run)

    # No `lock` on this one: a worker killed while running it would leave a `doing` job
    # holding the lock, and no later run could start to put that job (or any other) back.
    # Two runs at once are harmless: a job is put back once, the other's retry is refused.
    @app.periodic(cron=every(stalled_check_seconds))
    @app.task(name="walletcore.retry_stalled")
    async def retry_stalled(timestamp: int) -> int:
        """Put the jobs of dead workers back in the queue (procrastinate's recipe)."""
        stalled = list(
            await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_seconds)
        )
        for found in stalled:
            log.warning("job %s (%s) of a dead worker: run again", found.id, found.task_name)
            try:
                await app.job_manager.retry_job(found)
            except AlreadyEnqueued:  # pragma: no cover - our tasks have no queueing lock
                pass
            except ConnectorException:  # not `doing` any more: another run put it back
                log.info("job %s was put back by another run", found.id)
        return len(stalled)

    return app


def _periodic(
    app: App, name: str, every_seconds: float, run: Callable[[], Awaitable[object]]
) -> None:
    stale_after = max(3 * every_seconds, 30.0)

    async def job(timestamp: int) -> object:
        late = time.time() - timestamp
        if late > stale_after:
            log.info("%s of %ss ago skipped: a later run does its work", name, round(late))
            return None
        return await run()

    job.__name__ = job.__qualname__ = name
    task = app.task(name=f"walletcore.{name}", lock=f"walletcore.{name}", retry=RETRY)(job)
    app.periodic(cron=every(every_seconds), periodic_id=name)(task)


__all__ = ["RETRY", "TRANSIENT", "connector", "make_app"]
