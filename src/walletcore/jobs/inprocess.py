"""`InProcessJobs`: the jobs as asyncio tasks of the process that started them, for a
deployment on SQLite (one machine), where no task queue runs (`WALLETCORE_JOBS=inprocess`).

- `start()` runs each job once (so prices are stored before the first request), then one
  task per job runs it every `every_seconds`; a failed run is logged and the next one
  comes at its time. `aclose()` cancels them.
- Several processes on one SQLite file (`walletcore serve --workers N`) each run them:
  the refresh skips a table refreshed less than half an interval ago, and a trade moves
  once (compare-and-set), though the venue may be asked about it by more than one.
- `refresh_prices_if_due()`: for a process whose jobs were never started (a CLI command,
  an embedder that never called `start`), the shared price source refreshes inline, at
  most once per interval, as `RefreshingPriceSource` does.
"""

from __future__ import annotations

import asyncio
import logging
import time

from walletcore.jobs.catalog import Jobs, PeriodicJob

log = logging.getLogger("walletcore.jobs")


class InProcessJobs:
    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._tasks: list[asyncio.Task[None]] = []
        self._last_inline: float | None = None
        self._inline_lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self.runs: dict[str, int] = {}

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    async def start(self) -> None:
        if self._tasks:
            return
        periodic = self._jobs.periodic()
        for job in periodic:
            await self._run(job)
        self._tasks = [
            asyncio.create_task(self._loop(job), name=f"walletcore-job-{job.name}")
            for job in periodic
        ]

    async def aclose(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self, job: PeriodicJob) -> None:
        while True:
            await asyncio.sleep(job.every_seconds)
            await self._run(job)

    async def _run(self, job: PeriodicJob) -> None:
        try:
            await job.run()
        except Exception:
            log.exception("job %s failed; it runs again in %ss", job.name, job.every_seconds)
        self.runs[job.name] = self.runs.get(job.name, 0) + 1

    async def refresh_prices_if_due(self) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        if self._inline_lock is None or self._inline_lock[0] is not loop:  # one loop each
            self._inline_lock = (loop, asyncio.Lock())
        async with self._inline_lock[1]:
            last = self._last_inline
            if last is not None and time.monotonic() - last < self._jobs.refresh_seconds:
                return
            self._last_inline = time.monotonic()
            try:
                await self._jobs.refresh_prices()
            except Exception as exc:  # noqa: BLE001 - the stored values stay served
                log.warning("price refresh failed (%s)", type(exc).__name__)


__all__ = ["InProcessJobs"]
