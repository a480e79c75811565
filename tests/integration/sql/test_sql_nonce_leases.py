"""Nonce leases across OS processes on one database (PostgreSQL: advisory locks; SQLite:
lock files beside the database): a node that lags never makes two processes sign one
nonce, a nonce given back is taken next, and a process killed holding a lease does not
keep it."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sql_helpers import Db

from walletcore.domain.errors import AddressBusy
from walletcore.testing import autocommit
from walletcore_chains.evm.nonces import NonceBook
from walletcore_sql.nonces import advisory_key, nonce_leases
from walletcore_sql.storage import SqlStorage

CHILD = Path(__file__).with_name("nonce_child.py")
CHAIN = "eip155:1"  # as nonce_child.py
PROCESSES, EACH = 4, 12


async def stale_node() -> int:
    """A load-balanced node that has not seen any of the address's transactions."""
    return 0


def new_address() -> str:
    return "0x" + secrets.token_hex(20)


@pytest.fixture
async def migrated(database: Db) -> AsyncIterator[SqlStorage]:
    storage = database.storage(migrate=True)
    await storage.start()
    try:
        yield storage
    finally:
        await storage.aclose()


async def _spawn(database: Db, address: str, count: int, *mode: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        database.url,
        database.schema or "-",
        address,
        str(count),
        *mode,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")},
    )


async def _line(child: asyncio.subprocess.Process) -> list[str]:
    assert child.stdout is not None and child.stderr is not None
    line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
    if not line:
        await child.wait()
        raise AssertionError((await child.stderr.read()).decode()[-2000:])
    return line.decode().split()


async def _go(children: list[asyncio.subprocess.Process]) -> None:
    """Every child is ready (imported, connected lazily): start them at once."""
    for child in children:
        assert await _line(child) == ["READY"]
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"GO\n")
        await child.stdin.drain()


def _stop(children: list[asyncio.subprocess.Process]) -> None:
    for child in children:
        if child.returncode is None:
            child.kill()


async def test_processes_on_one_database_never_share_a_nonce_nor_skip_one(
    database: Db, migrated: SqlStorage
) -> None:
    address = new_address()
    children = [await _spawn(database, address, EACH) for _ in range(PROCESSES)]
    try:
        await _go(children)
        outputs = await asyncio.wait_for(
            asyncio.gather(*(child.communicate() for child in children)), timeout=120
        )
    finally:
        _stop(children)
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()[-2000:]
    taken = [
        [int(line.split()[1]) for line in out.decode().splitlines() if line.startswith("NONCE")]
        for out, _ in outputs
    ]
    assert [len(t) for t in taken] == [EACH] * PROCESSES
    everything = sorted(n for t in taken for n in t)
    # the node said 0 every time: only the leases kept the processes apart
    assert everything == list(range(PROCESSES * EACH))
    lease = await nonce_leases(migrated.database).acquire(CHAIN, address)
    assert lease.floor == PROCESSES * EACH
    await lease.release(None)


async def test_a_process_killed_holding_the_lease_does_not_keep_it(
    database: Db, migrated: SqlStorage
) -> None:
    address = new_address()
    child = await _spawn(database, address, 3, "hold")
    try:
        await _go([child])
        lines = [await _line(child) for _ in range(4)]
        assert lines == [["NONCE", "0"], ["NONCE", "1"], ["NONCE", "2"], ["HELD", "3"]]
        impatient = nonce_leases(migrated.database, wait=0.3)
        with pytest.raises(AddressBusy) as caught:
            await impatient.acquire(CHAIN, address)  # the other process holds it
        assert caught.value.status == 503 and "retry" in caught.value.message
    finally:
        _stop([child])
        await child.wait()

    book = NonceBook(leases=nonce_leases(migrated.database), chain=CHAIN)
    nonce = await asyncio.wait_for(book.reserve(address, stale_node), timeout=30)
    assert nonce == 3  # the dead process never sent its 3: taken again, no gap
    await book.release(address, nonce)


async def test_a_nonce_given_back_is_the_next_one_another_process_takes(
    database: Db, migrated: SqlStorage
) -> None:
    other = database.storage()
    try:
        here = NonceBook(leases=nonce_leases(migrated.database), chain=CHAIN)
        there = NonceBook(leases=nonce_leases(other.database), chain=CHAIN)
        address = new_address()
        assert await here.reserve(address, stale_node) == 0
        await here.accepted(address, 0)
        assert await here.reserve(address, stale_node) == 1
        await here.release(address, 1)  # signing failed: nothing sent
        assert await there.reserve(address, stale_node) == 1
        await there.accepted(address, 1)
        # this process saw only nonce 0 accepted; the lease's floor knows about 1
        assert await here.reserve(address, stale_node) == 2
        await here.accepted(address, 2)
        assert await there.reserve(address.upper().replace("0X", "0x"), stale_node) == 3
        await there.release(address, 3)
    finally:
        await other.aclose()


def test_the_advisory_key_is_a_stable_signed_64_bit_integer() -> None:
    key = advisory_key(CHAIN, "0xabc", "wc_1_ff")
    assert -(2**63) <= key < 2**63
    assert key == advisory_key(CHAIN, "0xabc", "wc_1_ff")
    assert key != advisory_key(CHAIN, "0xabc", "wc_2_ff")  # each schema its own locks
    assert key != advisory_key("eip155:56", "0xabc", "wc_1_ff")


@pytest.mark.postgres
async def test_held_leases_do_not_take_the_connections_sends_need(pg_database: Db) -> None:
    """A lease holds a PostgreSQL connection for as long as a send is in flight: those
    come from a pool of their own, or a few busy addresses would starve the storage."""
    storage = SqlStorage(
        pg_database.url, migrate=True, schema=pg_database.schema, pool_size=1, max_overflow=0
    )
    try:
        await storage.start()
        leases = [
            await nonce_leases(storage.database).acquire(CHAIN, new_address()) for _ in range(3)
        ]
        assert await asyncio.wait_for(autocommit(storage).clients.all(), timeout=10) == []
        for lease in leases:
            await lease.release(1)
    finally:
        await storage.aclose()


async def test_sqlite_lock_files_live_beside_the_database(
    sqlite_database: Db,
) -> None:
    storage = sqlite_database.storage(migrate=True)
    try:
        lease = await nonce_leases(storage.database).acquire(CHAIN, new_address())
        await lease.release(None)
    finally:
        await storage.aclose()
    database_file = Path(sqlite_database.url.removeprefix("sqlite+aiosqlite:///"))
    locks = database_file.with_name(database_file.name + "-nonce-locks")
    assert [p.suffix for p in locks.iterdir()] == [".lock"]
