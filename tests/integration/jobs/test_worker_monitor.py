"""Whether a `walletcore worker` is alive (`walletcore_jobs.monitor`), on a real PostgreSQL
and a real procrastinate worker: the readiness check `jobs` of HTTP processes that run no
job themselves. Without a worker, readiness says why prices are missing; a worker that
stopped is noticed once its heartbeat is older than `alive_seconds`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from jobs_support import CountingFeed, CountingVenue, PgSchema, job_container
from test_procrastinate import FAST

from walletcore.jobs import JobsMode
from walletcore.ports import CheckFailed
from walletcore.services.health import CheckStatus, HealthService
from walletcore_jobs.monitor import NEVER_STARTED, NONE_ALIVE, WorkerMonitor
from walletcore_jobs.worker import run_worker

pytestmark = pytest.mark.postgres

#: A heartbeat older than this is a dead worker here (FAST beats every 0.5 s).
ALIVE_SECONDS = 2.0


def monitor(db: PgSchema) -> WorkerMonitor:
    return WorkerMonitor(db.url, alive_seconds=ALIVE_SECONDS, schema=db.schema)


async def wait_alive(watch: WorkerMonitor, want: int | None, seconds: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while (found := await watch.alive()) != want:
        assert asyncio.get_running_loop().time() < deadline, f"alive: {found}, wanted {want}"
        await asyncio.sleep(0.2)


async def test_a_database_no_worker_ever_ran_on_says_so(pg_schema: PgSchema) -> None:
    watch = monitor(pg_schema)
    assert await watch.alive() is None
    with pytest.raises(CheckFailed) as failed:
        await watch.check()
    assert failed.value.reason == NEVER_STARTED
    assert "postgres" not in repr(watch)  # never the URL (it carries the password)


async def test_a_running_worker_is_alive_and_a_stopped_one_is_not(
    pg_schema: PgSchema, tmp_path: Path
) -> None:
    container = job_container(
        pg_schema.storage(),
        home=tmp_path / "worker",
        mode=JobsMode.PROCRASTINATE,
        feed=CountingFeed(),
        venue=CountingVenue(),
        database_url=pg_schema.url,
    )
    watch = monitor(pg_schema)
    worker = asyncio.create_task(run_worker(container, schema=pg_schema.schema, **FAST))
    try:
        await wait_alive(watch, 1)
        await watch.check()  # passes
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    # procrastinate's tables stay; the stopped worker's heartbeat does not count
    await asyncio.sleep(ALIVE_SECONDS + 0.5)
    assert await watch.alive() == 0
    with pytest.raises(CheckFailed) as failed:
        await watch.check()
    assert failed.value.reason == NONE_ALIVE.format(seconds=ALIVE_SECONDS)


async def test_readiness_shows_a_missing_worker_as_a_warning_beside_no_prices(
    pg_schema: PgSchema, tmp_path: Path
) -> None:
    """The `jobs` check says why; what it leads to (`no prices`) is what fails readiness,
    so a worker's restart alone takes no server out of rotation."""
    storage = pg_schema.storage()
    container = job_container(
        storage,
        home=tmp_path,
        mode=JobsMode.PROCRASTINATE,
        feed=CountingFeed(),
        venue=CountingVenue(),
        database_url=pg_schema.url,
    )
    health = HealthService(
        storage,
        {},
        container.prices(),
        max_price_age_seconds=900,
        jobs_monitor=monitor(pg_schema),
    )
    found = await health.readiness()
    checks = {c.name: c for c in found.checks}
    assert checks["jobs"].status is CheckStatus.WARNING
    assert checks["jobs"].error == NEVER_STARTED
    assert checks["prices"].status is CheckStatus.FAILING and checks["prices"].error == "no prices"
    assert not found.ready
