"""`FlockNonceLeases` on its own: one holder per (chain, address) across tasks and processes,
`AddressBusy` after the wait, and a holder killed with SIGKILL keeps nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest

from walletcore.domain.errors import AddressBusy
from walletcore_sql.filelocks import FlockNonceLeases, FloorStore

CHAIN = "eip155:1"
ALICE = "0x52908400098527886e0f7030069857d2e4169ee7"
BOB = "0x8ba1f109551bd432803012645ac136ddd64dba72"


class DictFloors(FloorStore):
    """Floors in a dict: every `leases(home)` of one test shares the home's."""

    shared: ClassVar[dict[Path, dict[tuple[str, str], int]]] = {}

    def __init__(self, home: Path) -> None:
        self._floors = self.shared.setdefault(home, {})

    async def read(self, chain: str, address: str) -> int:
        return self._floors.get((chain, address), 0)

    async def raise_to(self, chain: str, address: str, next_nonce: int) -> None:
        key = (chain, address)
        self._floors[key] = max(self._floors.get(key, 0), next_nonce)

    async def set_to(self, chain: str, address: str, next_nonce: int) -> None:
        self._floors[(chain, address)] = next_nonce


def leases(home: Path, wait: float = 5.0) -> FlockNonceLeases:
    return FlockNonceLeases(home / "locks", DictFloors(home), wait=wait)


async def test_a_second_holder_waits_then_gives_up_with_address_busy(tmp_path: Path) -> None:
    first = leases(tmp_path)
    held = await first.acquire(CHAIN, ALICE)
    started = time.monotonic()
    with pytest.raises(AddressBusy):
        await leases(tmp_path, wait=0.3).acquire(CHAIN, ALICE)
    assert 0.25 <= time.monotonic() - started < 3
    other = await leases(tmp_path, wait=0.3).acquire(CHAIN, BOB)  # another address is free
    await other.release(None)
    await held.release(4)
    again = await leases(tmp_path, wait=0.3).acquire(CHAIN, ALICE)
    assert again.floor == 4
    await again.release(None)


async def test_a_waiter_is_let_in_when_the_holder_releases(tmp_path: Path) -> None:
    store = leases(tmp_path)
    held = await store.acquire(CHAIN, ALICE)
    waiter = asyncio.ensure_future(store.acquire(CHAIN, ALICE))
    await asyncio.sleep(0.1)
    assert not waiter.done()
    await held.release(1)
    lease = await asyncio.wait_for(waiter, 5)
    assert lease.floor == 1
    await lease.release(None)


async def test_a_cancelled_waiter_leaves_nothing_held(tmp_path: Path) -> None:
    store = leases(tmp_path)
    held = await store.acquire(CHAIN, ALICE)
    waiter = asyncio.ensure_future(store.acquire(CHAIN, ALICE))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await held.release(None)
    lease = await leases(tmp_path, wait=0).acquire(CHAIN, ALICE)  # one try, and it is free
    await lease.release(None)


async def test_lock_files_are_private(tmp_path: Path) -> None:
    store = leases(tmp_path)
    lease = await store.acquire(CHAIN, ALICE)
    await lease.release(None)
    path = store.lock_path(CHAIN, ALICE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.exists()  # kept: unlinking a lock file would split later holders


HOLDER = """
import asyncio, sys
from pathlib import Path
from walletcore_sql.filelocks import FlockNonceLeases


class NoFloors:
    async def read(self, chain, address):
        return 0


async def main(home):
    leases = FlockNonceLeases(home / "locks", NoFloors())
    lease = await leases.acquire(sys.argv[2], sys.argv[3])
    print("HELD", flush=True)
    await asyncio.sleep(3600)
    await lease.release(None)

asyncio.run(main(Path(sys.argv[1])))
"""


async def test_a_holder_killed_with_sigkill_keeps_nothing(tmp_path: Path) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOLDER,
        str(tmp_path),
        CHAIN,
        ALICE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 30)
        assert line.strip() == b"HELD"
        with pytest.raises(AddressBusy):
            await leases(tmp_path, wait=0.2).acquire(CHAIN, ALICE)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        await asyncio.wait_for(child.wait(), 10)
    lease = await leases(tmp_path, wait=5).acquire(CHAIN, ALICE)
    assert lease.floor == 0
    await lease.release(None)
