"""The Repo's nonce leases: one holder per (chain, address) at a time, a floor that only
rises and survives the lease, run against memory, SQLite and PostgreSQL (the `repo`
fixture) and the sandbox file repo."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from walletcore.ports import NonceLeases, Repo
from walletcore.sandbox.filerepo import DATA_FILE, FileRepo

CHAIN = "eip155:1"
ALICE = "0x52908400098527886e0f7030069857d2e4169ee7"
BOB = "0x8ba1f109551bd432803012645ac136ddd64dba72"


async def _still_waiting(task: asyncio.Task[object]) -> bool:
    await asyncio.sleep(0.2)
    return not task.done()


async def check_floors(leases: NonceLeases) -> None:
    first = await leases.acquire(CHAIN, ALICE)
    assert first.floor == 0  # nothing seen yet
    await first.release(5)

    again = await leases.acquire(CHAIN, ALICE)
    assert again.floor == 5
    await again.release(None)  # nothing sent: the floor stays, so the nonce is reused

    same = await leases.acquire(CHAIN, ALICE)
    assert same.floor == 5
    await same.release(3)  # a floor never goes down
    await same.release(9)  # released already: ignored

    after = await leases.acquire(CHAIN, ALICE)
    assert after.floor == 5
    await after.release(6)

    # another chain (another chain id) or another address: its own sequence
    other_chain = await leases.acquire("eip155:56", ALICE)
    other_address = await leases.acquire(CHAIN, BOB)
    assert (other_chain.floor, other_address.floor) == (0, 0)
    await other_chain.release(None)
    await other_address.release(None)
    last = await leases.acquire(CHAIN, ALICE)
    assert last.floor == 6
    for bad in (-1, True):
        with pytest.raises(ValueError, match="whole number"):
            await last.reset(bad)
    await last.reset(2)  # the operator's repair: lower, and it is stored
    assert last.floor == 2
    await last.release(None)
    with pytest.raises(RuntimeError, match="released"):
        await last.reset(0)
    lowered = await leases.acquire(CHAIN, ALICE)
    assert lowered.floor == 2
    await lowered.release(3)  # and rises again from there
    raised = await leases.acquire(CHAIN, ALICE)
    assert raised.floor == 3
    await raised.reset(12)  # higher works too
    await raised.release(None)
    final = await leases.acquire(CHAIN, ALICE)
    assert final.floor == 12
    await final.release(None)


async def check_one_holder(leases: NonceLeases) -> None:
    held = await leases.acquire(CHAIN, ALICE)
    waiter = asyncio.ensure_future(leases.acquire(CHAIN, ALICE))
    try:
        assert await _still_waiting(waiter)  # type: ignore[arg-type]
        # another address is not held up meanwhile
        bob = await asyncio.wait_for(leases.acquire(CHAIN, BOB), 5)
        await bob.release(1)
        await held.release(held.floor + 1)
        next_holder = await asyncio.wait_for(waiter, 10)
        assert next_holder.floor == held.floor + 1  # it sees the previous holder's nonce
        await next_holder.release(None)
    finally:
        if not waiter.done():
            waiter.cancel()


async def test_the_floor_rises_with_accepted_nonces_and_falls_only_by_a_reset(repo: Repo) -> None:
    await check_floors(repo.nonce_leases())


async def test_a_lease_has_one_holder_at_a_time(repo: Repo) -> None:
    await check_one_holder(repo.nonce_leases())


async def test_a_waiter_that_gives_up_leaves_no_lease_behind(repo: Repo) -> None:
    leases = repo.nonce_leases()
    held = await leases.acquire(CHAIN, ALICE)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(leases.acquire(CHAIN, ALICE), 0.3)
    await held.release(1)
    # had the cancelled waiter kept (or later taken) the lock, this would wait for ever
    lease = await asyncio.wait_for(leases.acquire(CHAIN, ALICE), 10)
    assert lease.floor == 1
    await lease.release(None)


async def test_the_file_repo_keeps_floors_on_disk_and_shares_leases(tmp_path: Path) -> None:
    first = FileRepo(tmp_path / DATA_FILE)
    await check_floors(first.nonce_leases())
    await check_one_holder(first.nonce_leases())

    # another process on the same home (here: another repo, another descriptor)
    second = FileRepo(tmp_path / DATA_FILE)
    held = await first.nonce_leases().acquire(CHAIN, ALICE)
    assert held.floor == 13  # check_floors left 12, check_one_holder moved it to 13
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(second.nonce_leases().acquire(CHAIN, ALICE), 0.3)
    await held.release(14)
    lease = await asyncio.wait_for(second.nonce_leases().acquire(CHAIN, ALICE), 10)
    assert lease.floor == 14
    await lease.release(None)
    assert (tmp_path / "sandbox-nonce-floors.json").exists()


@pytest.mark.parametrize("repo_name", ["sql", "file"])
async def test_the_nonce_wait_is_a_setting(tmp_path: Path, repo_name: str) -> None:
    """`WALLETCORE_NONCE_WAIT_SECONDS`: how long a send waits for another process's lease
    before `503 Another send from this address is still in progress`."""
    from walletcore import plugins
    from walletcore.domain.errors import AddressBusy
    from walletcore.ports import Lifecycle
    from walletcore.settings import Settings

    settings = Settings(home=tmp_path, repo=repo_name, nonce_wait_seconds=0.2)
    first = plugins.build("walletcore.repos", repo_name, settings=settings)
    second = plugins.build("walletcore.repos", repo_name, settings=settings)  # another process
    for repo in (first, second):
        if isinstance(repo, Lifecycle):
            await repo.start()
    try:
        held = await first.nonce_leases().acquire(CHAIN, ALICE)
        started = asyncio.get_running_loop().time()
        with pytest.raises(AddressBusy) as busy:
            await second.nonce_leases().acquire(CHAIN, ALICE)
        waited = asyncio.get_running_loop().time() - started
        assert 0.2 <= waited < 5, waited
        assert busy.value.status == 503 and "retry" in busy.value.message
        await held.release(1)
        lease = await second.nonce_leases().acquire(CHAIN, ALICE)
        assert lease.floor == 1
        await lease.release(None)
    finally:
        for repo in (first, second):
            if isinstance(repo, Lifecycle):
                await repo.aclose()
