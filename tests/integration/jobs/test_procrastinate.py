"""The jobs on procrastinate, several workers on one PostgreSQL: each period deferred (at
most once by each worker), each trade settled once, a worker killed mid-job replaced with
nothing done twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jobs_support import (
    CountingFeed,
    CountingVenue,
    PgSchema,
    count_lines,
    executing_trades,
    job_container,
    settle_entries,
    statuses,
)

from walletcore.domain.assets import Fiat
from walletcore.domain.trade import TradeStatus
from walletcore.jobs import JobsMode
from walletcore.pricing import SharedPriceSource
from walletcore_jobs.urls import libpq_url
from walletcore_jobs.worker import run_worker

pytestmark = pytest.mark.postgres

HERE = Path(__file__).parent
FAST = {
    "update_heartbeat_interval": 0.5,
    "stalled_worker_timeout": 2,
    "fetch_job_polling_interval": 0.2,
    "install_signal_handlers": False,
}


def _container(db: PgSchema, tmp: Path, name: str, feed: Any, venue: Any, **kw: Any) -> Any:
    return job_container(
        db.storage(),
        home=tmp / name,
        mode=JobsMode.PROCRASTINATE,
        feed=feed,
        venue=venue,
        database_url=db.url,
        **kw,
    )


async def _rows(db: PgSchema, query: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(
        libpq_url(db.url), options=f"-c search_path={db.schema}", autocommit=True
    ) as conn:
        return await (await conn.execute(query)).fetchall()  # type: ignore[arg-type]


async def _workers(containers: list[Any], db: PgSchema, seconds: float) -> None:
    tasks = [
        asyncio.create_task(run_worker(c, schema=db.schema, stalled_seconds=2, **FAST))
        for c in containers
    ]
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_two_workers_defer_each_period_once_and_settle_each_trade_once(
    pg_schema: PgSchema, tmp_path: Path
) -> None:
    feed = CountingFeed()
    venues = [CountingVenue(), CountingVenue()]
    containers = [
        _container(pg_schema, tmp_path, f"w{n}", feed, venues[n], refresh_seconds=1)
        for n in range(2)
    ]
    storage = pg_schema.storage()
    trades = await executing_trades(storage, 5)
    started = time.time()
    await _workers(containers, pg_schema, 4.5)
    elapsed = time.time() - started

    defers = await _rows(
        pg_schema,
        "SELECT task_name, defer_timestamp, count(*) FROM procrastinate_periodic_defers "
        "GROUP BY 1, 2",
    )
    assert defers and all(n == 1 for _, _, n in defers)  # one row per task and second
    jobs = await _rows(
        pg_schema,
        "SELECT task_name, args->>'timestamp' FROM procrastinate_jobs "
        "WHERE task_name = 'walletcore.refresh_prices'",
    )
    per_period = Counter(ts for _, ts in jobs)
    # at most once by each worker (a worker a whole period behind may defer a period the
    # other already did: docs/jobs.md), and one fetch per period all the same
    assert per_period and max(per_period.values()) <= len(containers)
    # one fetch per period, for both workers together (a run may skip a fresh table)
    assert 1 <= feed.fetches <= len(per_period) <= elapsed + 1

    assert set(await statuses(storage, trades)) == {TradeStatus.COMPLETED}
    assert sorted(await settle_entries(storage)) == sorted(t.trade_id for t in trades)
    asked = Counter(venues[0].statuses + venues[1].statuses)
    assert asked == Counter({t.trade_id: 1 for t in trades})  # the venue asked once each

    # an HTTP process reads what the workers stored, and never calls the feed
    http = _container(pg_schema, tmp_path, "http", CountingFeed(), CountingVenue())
    served = http.prices()
    assert isinstance(served, SharedPriceSource)
    assert await served.unit_price("ETH", Fiat.USD) == feed.price
    await http.storage().aclose()
    await storage.aclose()


async def test_a_worker_killed_mid_job_is_replaced_and_nothing_is_done_twice(
    pg_schema: PgSchema, tmp_path: Path
) -> None:
    storage = pg_schema.storage()
    trades = await executing_trades(storage, 3)
    log, block = tmp_path / "calls.log", tmp_path / "block"
    block.touch()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    args = [sys.executable, str(HERE / "job_worker.py"), pg_schema.url, pg_schema.schema]
    killed = await asyncio.create_subprocess_exec(
        *args, str(tmp_path / "h1"), str(log), str(block), env=env
    )
    try:
        deadline = time.monotonic() + 30
        while "status" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the first worker never reached the venue"
            assert killed.returncode is None, "the first worker died"
            await asyncio.sleep(0.05)
        doing = await _rows(
            pg_schema,
            "SELECT id, worker_id FROM procrastinate_jobs "
            "WHERE task_name = 'walletcore.settle_trades' AND status = 'doing'",
        )
        assert len(doing) == 1
        killed.send_signal(signal.SIGKILL)  # mid-job: the venue asked, nothing recorded
        await asyncio.wait_for(killed.wait(), 10)
        # The dead worker was running the stall check as well (it runs every second, so
        # under load it often is): that job stays `doing` too. The recovery must not
        # wait for it (a lock on the stall check once stopped every later one).
        await _rows(
            pg_schema,
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, status, "
            "worker_id) VALUES ('default', 'walletcore.retry_stalled', "
            f"'walletcore.retry_stalled', '{{\"timestamp\": 0}}', 'doing', {doing[0][1]}) "
            "RETURNING id",
        )
    finally:
        if killed.returncode is None:
            killed.kill()
            await killed.wait()
    assert await statuses(storage, trades) == [TradeStatus.EXECUTING] * 3
    block.unlink()

    second = await asyncio.create_subprocess_exec(*args, str(tmp_path / "h2"), str(log), env=env)
    try:
        # the new worker's start-up (imports), the stall detection (2 s without heartbeat)
        # and a settlement period: seconds, but a loaded two-core CI machine can stretch it
        deadline = time.monotonic() + 90
        while set(await statuses(storage, trades)) != {TradeStatus.COMPLETED}:
            assert time.monotonic() < deadline, "the trades were never settled"
            await asyncio.sleep(0.1)
        # the killed job: put back by the live worker, then run to its end
        deadline = time.monotonic() + 15
        while True:
            (status,) = (
                await _rows(
                    pg_schema, f"SELECT status FROM procrastinate_jobs WHERE id = {doing[0][0]}"
                )
            )[0]
            if status in ("succeeded", "failed") or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert status == "succeeded"
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(second.wait(), 15)
        except TimeoutError:
            second.kill()
            await second.wait()
    # each trade moved once, with one `trade.settle` entry; the venue was asked again
    # only about what the killed run never recorded (asking is a read)
    assert sorted(await settle_entries(storage)) == sorted(t.trade_id for t in trades)
    assert count_lines(log) >= 3
    await storage.aclose()
