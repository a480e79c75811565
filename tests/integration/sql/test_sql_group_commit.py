"""SQLite group commit (`walletcore_sql.database.sqlite_group`): write units that queue while
one runs share its transaction, each in a savepoint, and one COMMIT (one fsync) makes them
all durable. Each unit still commits or fails alone, and returns only once its transaction
committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sql_helpers import committed_marks, count_commits, marks_storage
from sqlalchemy import text

from walletcore.domain.errors import StorageUnavailable
from walletcore_sql.database.sqlite_group import WriteQueue
from walletcore_sql.storage import SqlStorage


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SqlStorage]:
    async with marks_storage(tmp_path) as opened:
        yield opened


async def _mark(storage: SqlStorage, name: str, *, fail: bool = False) -> set[str]:
    async with storage.database.transaction(write=True) as conn:
        await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": name})
        await asyncio.sleep(0)  # others queue meanwhile
        if fail:
            raise ValueError(f"{name} fails")
    return committed_marks(storage)  # on exit the unit's row is on disk


async def test_units_queued_together_share_one_commit_and_each_is_durable_on_return(
    storage: SqlStorage,
) -> None:
    commits = count_commits(storage)
    seen = await asyncio.gather(*(_mark(storage, f"u{i}") for i in range(40)))
    assert committed_marks(storage) == {f"u{i}" for i in range(40)}
    for i, names in enumerate(seen):
        assert f"u{i}" in names  # durable by the time its unit returned
    # 40 units, at most 32 to a transaction, queued while the first ran: 2 to a few commits
    assert 2 <= commits[0] < 10


async def test_a_failing_unit_is_undone_alone_in_its_group(storage: SqlStorage) -> None:
    commits = count_commits(storage)
    outcomes = await asyncio.gather(
        *(_mark(storage, f"u{i}", fail=i in (0, 5, 9)) for i in range(12)),
        return_exceptions=True,
    )
    failed = {i for i, o in enumerate(outcomes) if isinstance(o, ValueError)}
    assert failed == {0, 5, 9}
    assert committed_marks(storage) == {f"u{i}" for i in range(12)} - {"u0", "u5", "u9"}
    assert commits[0] < 12  # still grouped


async def test_a_unit_the_database_refuses_midway_is_undone_whole(storage: SqlStorage) -> None:
    """A unit whose second statement breaks a constraint leaves none of its rows (its
    savepoint, on the driver, is rolled back to), and the group's other units commit."""
    await _mark(storage, "taken")

    async def two_rows(name: str, second: str) -> None:
        async with storage.database.transaction(write=True) as conn:
            await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": name})
            await asyncio.sleep(0)  # others queue meanwhile
            await conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": second})

    outcomes = await asyncio.gather(
        _mark(storage, "first"),  # the group's first unit: no savepoint
        two_rows("half", "taken"),  # in a savepoint: its "half" must not stay
        _mark(storage, "after"),
        return_exceptions=True,
    )
    assert not isinstance(outcomes[0], BaseException) and not isinstance(outcomes[2], BaseException)
    assert isinstance(outcomes[1], Exception), outcomes
    assert committed_marks(storage) == {"taken", "first", "after"}


async def test_a_failed_commit_fails_every_unit_of_the_group(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(_batch: Any) -> None:
        raise StorageUnavailable("disk full")

    monkeypatch.setattr(WriteQueue, "_commit", staticmethod(refuse))
    outcomes = await asyncio.gather(
        *(_mark(storage, f"u{i}") for i in range(6)), return_exceptions=True
    )
    assert all(isinstance(o, StorageUnavailable) for o in outcomes), outcomes
    monkeypatch.undo()
    # nothing was written, and the next unit works on a clean connection
    assert committed_marks(storage) == set()
    assert "after" in await _mark(storage, "after")
    assert committed_marks(storage) == {"after"}


async def test_a_queued_unit_cancelled_does_not_strand_the_group(storage: SqlStorage) -> None:
    release = asyncio.Event()

    async def slow() -> None:
        async with storage.database.transaction(write=True) as conn:
            await conn.execute(text("INSERT INTO marks VALUES ('slow')"))
            await release.wait()

    first = asyncio.create_task(slow())
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(_mark(storage, "queued"))
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.sleep(0)  # `slow` leaves its transaction open for `queued` ...
    queued.cancel()  # ... which never comes
    await asyncio.wait_for(first, 5)  # committed all the same (the group's closer)
    assert "slow" in committed_marks(storage)
    assert "later" in await asyncio.wait_for(_mark(storage, "later"), 5)


async def test_readers_never_see_a_group_before_it_commits(storage: SqlStorage) -> None:
    inside = asyncio.Event()
    release = asyncio.Event()

    async def holding() -> None:
        async with storage.database.transaction(write=True) as conn:
            await conn.execute(text("INSERT INTO marks VALUES ('held')"))
            inside.set()
            await release.wait()

    task = asyncio.create_task(holding())
    await inside.wait()
    async with storage.database.transaction() as conn:
        rows = (await conn.execute(text("SELECT name FROM marks"))).all()
    assert rows == []
    release.set()
    await task
    async with storage.database.transaction() as conn:
        rows = (await conn.execute(text("SELECT name FROM marks"))).all()
    assert [r[0] for r in rows] == ["held"]
