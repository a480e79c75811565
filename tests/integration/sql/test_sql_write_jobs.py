"""SQLite write units handed over whole (`Database.submit`, `SqliteJobs.submit`): queued
behind the unit holding the write lock, they are run by the queue's runner one after
another, each in its own savepoint of one group, with no loop turn of their own; each
still commits or fails alone and returns only once its group committed. And the stores'
write units (`SqlStorage.write`) open their transaction at their first statement."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sql_helpers import committed_marks, count_commits, marks_storage, sqlite_path
from sqlalchemy import text

from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.database import sqlite as sqlite_module
from walletcore_sql.database.sqlite_group import WriteQueue
from walletcore_sql.storage import SqlStorage


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SqlStorage]:
    async with marks_storage(tmp_path) as opened:
        yield opened


def _insert(*names: str, fail: bool = False, pause: bool = False) -> Any:
    async def work(conn: Any) -> str:
        for name in names:
            await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": name})
            if pause:
                await asyncio.sleep(0)  # a job may wait: it holds the group meanwhile
        if fail:
            raise ValueError(f"{names} fails")
        return names[0]

    return work


async def _job(storage: SqlStorage, *names: str, **how: bool) -> set[str]:
    assert await storage.database.submit(_insert(*names, **how)) == names[0]
    return committed_marks(storage)  # on return its rows are on disk


class _Holder:
    """A unit that holds the process's write lock until released."""

    def __init__(self, storage: SqlStorage, name: str = "holder") -> None:
        self.inside = asyncio.Event()
        self.release = asyncio.Event()
        self.task = asyncio.create_task(self._hold(storage, name))

    async def _hold(self, storage: SqlStorage, name: str) -> None:
        async with storage.database.transaction(write=True) as conn:
            await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": name})
            self.inside.set()
            await self.release.wait()


async def test_jobs_queued_behind_a_unit_share_one_group_and_each_is_durable_on_return(
    storage: SqlStorage,
) -> None:
    holder = _Holder(storage)
    await holder.inside.wait()
    commits = count_commits(storage)
    jobs = [asyncio.create_task(_job(storage, f"j{i}")) for i in range(40)]
    await asyncio.sleep(0.01)
    queue = storage.database._bound.writers  # type: ignore[union-attr]
    assert queue is not None and len(queue.jobs.waiting) == 40  # handed over, not run yet
    assert committed_marks(storage) == set()
    holder.release.set()
    seen = await asyncio.wait_for(asyncio.gather(*jobs), 10)
    await holder.task
    assert committed_marks(storage) == {"holder"} | {f"j{i}" for i in range(40)}
    for i, names in enumerate(seen):
        assert f"j{i}" in names
    # the holder's group took the first 31 jobs (32 units to a group), the next the rest
    assert commits[0] == 2


async def test_a_failing_job_is_undone_alone_and_its_caller_gets_the_error(
    storage: SqlStorage,
) -> None:
    await _job(storage, "taken")
    holder = _Holder(storage)
    await holder.inside.wait()
    outcomes_task = asyncio.gather(
        _job(storage, "a"),
        _job(storage, "b", fail=True),  # raises after its insert: the insert is undone
        _job(storage, "half", "taken"),  # its second insert is refused: "half" is undone
        _job(storage, "c"),
        return_exceptions=True,
    )
    await asyncio.sleep(0.01)
    holder.release.set()
    outcomes = await asyncio.wait_for(outcomes_task, 10)
    await holder.task
    assert isinstance(outcomes[1], ValueError)
    assert isinstance(outcomes[2], StorageError), outcomes[2]
    assert not isinstance(outcomes[0], BaseException)
    assert not isinstance(outcomes[3], BaseException)
    assert committed_marks(storage) == {"taken", "holder", "a", "c"}


async def test_a_job_that_waits_midway_keeps_its_group_whole(storage: SqlStorage) -> None:
    holder = _Holder(storage)
    await holder.inside.wait()
    jobs = asyncio.gather(
        _job(storage, "p1", "p2", pause=True),
        *(_job(storage, f"q{i}") for i in range(5)),
    )
    await asyncio.sleep(0.01)
    holder.release.set()
    await asyncio.wait_for(jobs, 10)
    await holder.task
    assert committed_marks(storage) == {"holder", "p1", "p2"} | {f"q{i}" for i in range(5)}


async def test_a_job_whose_caller_is_cancelled_while_queued_never_runs(
    storage: SqlStorage,
) -> None:
    holder = _Holder(storage)
    await holder.inside.wait()
    cancelled = asyncio.create_task(_job(storage, "cancelled"))
    kept = asyncio.create_task(_job(storage, "kept"))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    holder.release.set()
    assert "kept" in await asyncio.wait_for(kept, 10)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await holder.task
    assert committed_marks(storage) == {"holder", "kept"}
    assert "later" in await asyncio.wait_for(_job(storage, "later"), 5)


async def test_a_failed_commit_fails_the_unit_and_every_job_that_joined_its_group(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = _Holder(storage)
    await holder.inside.wait()
    jobs = asyncio.gather(*(_job(storage, f"j{i}") for i in range(6)), return_exceptions=True)
    await asyncio.sleep(0.01)

    def disk_full(_batch: Any) -> None:
        raise StorageUnavailable("disk full")

    monkeypatch.setattr(WriteQueue, "_commit", staticmethod(disk_full))
    holder.release.set()
    outcomes = await asyncio.wait_for(jobs, 10)
    assert all(isinstance(o, StorageUnavailable) for o in outcomes), outcomes
    with pytest.raises(StorageUnavailable):
        await holder.task
    monkeypatch.undo()
    assert committed_marks(storage) == set()  # the group's rows, the holder's too, are gone
    assert "after" in await asyncio.wait_for(_job(storage, "after"), 5)


async def test_jobs_fail_together_while_another_process_holds_the_lock_then_run_again(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "SQLITE_BUSY_TIMEOUT_MS", 100)
    other = sqlite3.connect(sqlite_path(storage), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's writer
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(_job(storage, f"j{i}") for i in range(5)), return_exceptions=True),
            10,
        )
        assert all(isinstance(o, StorageUnavailable) for o in outcomes), outcomes
        queue = storage.database._bound.writers  # type: ignore[union-attr]
        assert queue is not None and not queue.jobs.waiting and not queue.jobs.busy
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "after" in await asyncio.wait_for(_job(storage, "after"), 5)
    assert committed_marks(storage) == {"after"}


async def test_a_runner_cancelled_midway_cancels_its_job_and_the_queue_goes_on(
    storage: SqlStorage,
) -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def stuck(conn: Any) -> str:
        await conn.execute(text("INSERT INTO marks VALUES ('stuck')"))
        started.set()
        await never.wait()
        return "stuck"

    holder = _Holder(storage)
    await holder.inside.wait()
    caller = asyncio.create_task(storage.database.submit(stuck))
    await asyncio.sleep(0.01)
    holder.release.set()
    await asyncio.wait_for(started.wait(), 5)
    queue = storage.database._bound.writers  # type: ignore[union-attr]
    assert queue is not None
    runners = list(queue.jobs.flights)
    assert len(runners) == 1
    runners[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, 5)
    await holder.task
    assert committed_marks(storage) == {"holder"}  # the stuck job's row was undone
    assert "later" in await asyncio.wait_for(_job(storage, "later"), 5)


async def test_jobs_and_units_interleaved_all_commit(storage: SqlStorage) -> None:
    async def unit(name: str) -> None:
        async with storage.database.transaction(write=True) as conn:
            await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": name})
            await asyncio.sleep(0)

    work = []
    for i in range(60):
        work.append(unit(f"u{i}") if i % 3 == 0 else _job(storage, f"j{i}"))
    await asyncio.wait_for(asyncio.gather(*work), 20)
    expected = {f"u{i}" if i % 3 == 0 else f"j{i}" for i in range(60)}
    assert committed_marks(storage) == expected


async def test_a_store_write_unit_takes_the_lock_at_its_first_statement(
    storage: SqlStorage,
) -> None:
    def locked() -> bool:
        queue = storage.database._bound.writers  # type: ignore[union-attr]
        assert queue is not None
        return queue.lock.locked()

    async with storage.write() as unit:
        assert not locked()  # nothing sent yet: no lock, no transaction
        assert await unit.clients.get("nobody") is None  # a read: the transaction opens
        assert locked()
    assert not locked()


async def test_a_store_write_unit_that_raises_before_sending_writes_nothing(
    storage: SqlStorage,
) -> None:
    entry = AuditEntry(
        at=datetime.now(UTC), action="test.write", request_id="r1", client_id="c1", outcome="ok"
    )
    with pytest.raises(ValueError):
        async with storage.write() as unit:
            await unit.audit.append(entry)  # deferred
            assert not storage.database._bound.writers.lock.locked()  # type: ignore[union-attr]
            raise ValueError("changed its mind")
    async with storage.read() as unit:
        assert await unit.audit.newest(10) == []
    async with storage.write() as unit:
        await unit.audit.append(entry)
    async with storage.read() as unit:
        assert [e.action for e in await unit.audit.newest(10)] == ["test.write"]
