"""A `walletcore worker` of the job tests, as a process of its own (killed with SIGKILL):
    python job_worker.py <url> <schema> <home> <log file> [<block file>]
The venue and the feed append their calls to the log; the venue hangs while the block
file exists."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from jobs_support import CountingFeed, CountingVenue, job_container

from walletcore.jobs import JobsMode
from walletcore_jobs.worker import run_worker
from walletcore_sql.storage import SqlStorage


async def main(url: str, schema: str, home: str, log: str, block: str | None) -> None:
    container = job_container(
        SqlStorage(url, migrate=False, schema=schema),
        home=Path(home),
        mode=JobsMode.PROCRASTINATE,
        feed=CountingFeed(Path(log)),
        venue=CountingVenue(Path(log), Path(block) if block else None),
        database_url=url,
        refresh_seconds=60,
        settle_seconds=1,
    )
    await run_worker(
        container,
        schema=schema,
        concurrency=4,
        stalled_seconds=2,
        stalled_check_seconds=1,
        update_heartbeat_interval=0.5,
        stalled_worker_timeout=2,
        fetch_job_polling_interval=0.2,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], args[2], args[3], args[4] if len(args) > 4 else None))
