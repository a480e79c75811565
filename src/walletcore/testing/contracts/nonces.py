"""`NonceLeasesContract`: what every `walletcore.ports.NonceLeases` promises, as pytest tests.

    from walletcore.testing.contracts import NonceLeasesContract

    class TestMyLeases(NonceLeasesContract):
        @pytest.fixture
        def nonce_leases(self):              # on an empty store
            return MyLeases(...)

        @pytest.fixture
        def other_nonce_leases(self, ...):   # optional: another process's, same store
            return MyLeases(...)

`other_nonce_leases` defaults to `nonce_leases` itself (leases of one process); override it
in the subclass to prove leases shared across processes. Needs pytest and pytest-asyncio.
"""

from __future__ import annotations

import asyncio

import pytest

from walletcore.ports.nonces import NonceLeases

CHAIN = "eip155:1"
ALICE = "0x52908400098527886e0f7030069857d2e4169ee7"
BOB = "0x8ba1f109551bd432803012645ac136ddd64dba72"


async def _still_waiting(task: asyncio.Future[object]) -> bool:
    await asyncio.sleep(0.2)
    return not task.done()


class NonceLeasesContract:
    """The contract; a subclass brings the `nonce_leases` fixture (and may bring
    `other_nonce_leases`)."""

    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def other_nonce_leases(self, nonce_leases: NonceLeases) -> NonceLeases:
        return nonce_leases

    async def test_the_floor_rises_with_accepted_nonces_and_falls_only_by_a_reset(
        self, nonce_leases: NonceLeases
    ) -> None:
        leases = nonce_leases
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

    async def test_a_lease_has_one_holder_at_a_time(self, nonce_leases: NonceLeases) -> None:
        leases = nonce_leases
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

    async def test_a_waiter_that_gives_up_leaves_no_lease_behind(
        self, nonce_leases: NonceLeases
    ) -> None:
        leases = nonce_leases
        held = await leases.acquire(CHAIN, ALICE)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(leases.acquire(CHAIN, ALICE), 0.3)
        await held.release(1)
        # had the cancelled waiter kept (or later taken) the lock, this would wait for ever
        lease = await asyncio.wait_for(leases.acquire(CHAIN, ALICE), 10)
        assert lease.floor == 1
        await lease.release(None)

    async def test_another_process_waits_for_the_lease_and_sees_its_floor(
        self, nonce_leases: NonceLeases, other_nonce_leases: NonceLeases
    ) -> None:
        held = await nonce_leases.acquire(CHAIN, ALICE)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(other_nonce_leases.acquire(CHAIN, ALICE), 0.3)
        await held.release(14)
        lease = await asyncio.wait_for(other_nonce_leases.acquire(CHAIN, ALICE), 10)
        assert lease.floor == 14
        await lease.release(None)
        mine = await asyncio.wait_for(nonce_leases.acquire(CHAIN, ALICE), 10)
        assert mine.floor == 14
        await mine.release(None)


__all__ = ["ALICE", "BOB", "CHAIN", "NonceLeasesContract"]
