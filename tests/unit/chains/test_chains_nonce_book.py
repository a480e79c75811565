"""`NonceBook` on the Repo's nonce leases: the in-process gate first, then the lease; the
nonce is the highest of the node's count, this process's floor and the lease's floor;
lapses, cancellations and failing releases never leave an address stuck."""

from __future__ import annotations

import asyncio
import logging

import pytest

from walletcore.domain.errors import StorageUnavailable
from walletcore.nonces import LocalNonceLeases
from walletcore.ports import NonceLease, NonceLeases
from walletcore_chains.evm import nonces
from walletcore_chains.evm.nonces import NonceBook

CHAIN = "eip155:1"
ALICE = "0x52908400098527886E0F7030069857D2E4169EE7"


async def stale_node() -> int:
    """A lagging node: it has seen none of the address's transactions."""
    return 0


def books(leases: NonceLeases, count: int = 2) -> list[NonceBook]:
    """Books of `count` processes sharing one store."""
    return [NonceBook(leases=leases, chain=CHAIN) for _ in range(count)]


async def test_books_of_several_processes_take_distinct_consecutive_nonces() -> None:
    shared = books(LocalNonceLeases(), 3)

    async def send(book: NonceBook, i: int) -> int:
        nonce = await book.reserve(ALICE, stale_node)
        await asyncio.sleep(0.001 * (i % 3))
        await book.accepted(ALICE, nonce)
        return nonce

    nonces = await asyncio.gather(*(send(shared[i % 3], i) for i in range(30)))
    assert sorted(nonces) == list(range(30))


async def test_without_leases_two_processes_would_collide() -> None:
    """What the leases prevent: each book alone trusts the node and its own floor."""
    a, b = NonceBook(), NonceBook()
    assert await a.reserve(ALICE, stale_node) == await b.reserve(ALICE, stale_node) == 0


async def test_the_node_the_process_and_the_lease_each_can_raise_the_nonce() -> None:
    leases = LocalNonceLeases()
    a, b = books(leases)
    lease = await leases.acquire(CHAIN, ALICE.lower())
    await lease.release(7)  # another process saw 0..6 accepted

    async def node_says_nine() -> int:
        return 9

    assert await a.reserve(ALICE, stale_node) == 7
    await a.accepted(ALICE, 7)
    assert await a.reserve(ALICE, node_says_nine) == 9
    await a.accepted(ALICE, 9)
    assert await b.reserve(ALICE, stale_node) == 10
    await b.release(ALICE, 10)
    assert await a.reserve(ALICE.lower(), stale_node) == 10  # given back: reused, no gap
    await a.release(ALICE, 10)


async def test_a_vanished_holder_loses_the_lease_after_the_lapse() -> None:
    leases = LocalNonceLeases()
    forgetful = NonceBook(lease=0.2, leases=leases, chain=CHAIN)
    other = NonceBook(leases=leases, chain=CHAIN)
    assert await forgetful.reserve(ALICE, stale_node) == 0  # never accepted nor released
    waiting = asyncio.ensure_future(other.reserve(ALICE, stale_node))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert await asyncio.wait_for(waiting, 5) == 0  # nothing was sent: the same nonce
    assert forgetful.held(ALICE) is None
    await forgetful.accepted(ALICE, 0)  # too late: not the holder any more, ignored
    assert other.held(ALICE) == 0
    await other.accepted(ALICE, 0)
    assert await forgetful.reserve(ALICE, stale_node) == 1
    await forgetful.release(ALICE, 1)


async def test_a_reservation_cancelled_while_waiting_leaves_the_gate_open() -> None:
    leases = LocalNonceLeases()
    a, b = books(leases)
    assert await a.reserve(ALICE, stale_node) == 0
    waiting = asyncio.ensure_future(b.reserve(ALICE, stale_node))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await a.accepted(ALICE, 0)
    assert await asyncio.wait_for(b.reserve(ALICE, stale_node), 5) == 1
    await b.release(ALICE, 1)


async def test_a_node_failure_after_the_lease_gives_the_lease_back() -> None:
    leases = LocalNonceLeases()
    a, b = books(leases)

    async def down() -> int:
        raise StorageUnavailable()

    with pytest.raises(StorageUnavailable):
        await a.reserve(ALICE, down)
    assert a.held(ALICE) is None
    assert await asyncio.wait_for(b.reserve(ALICE, stale_node), 5) == 0
    await b.release(ALICE, 0)


class _StuckFloors(NonceLeases):
    """Leases whose release cannot store its floor (the database went away)."""

    def __init__(self) -> None:
        self.inner = LocalNonceLeases()
        self.failures = 0

    async def acquire(self, chain: str, address: str) -> NonceLease:
        lease = await self.inner.acquire(chain, address)
        outer = self

        class Failing(NonceLease):
            floor = lease.floor

            async def release(self, advanced_to: int | None) -> None:
                await lease.release(None)
                if advanced_to is not None:
                    outer.failures += 1
                    raise StorageUnavailable()

            async def reset(self, next_nonce: int) -> None:
                await lease.reset(next_nonce)

        return Failing()


async def test_a_lease_that_fails_to_store_its_floor_is_logged_and_frees_the_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = _StuckFloors()
    book = NonceBook(leases=leases, chain=CHAIN)
    with caplog.at_level(logging.WARNING, logger="walletcore_chains.evm.nonces"):
        nonce = await book.reserve(ALICE, stale_node)
        await book.accepted(ALICE, nonce)  # the send succeeded: not turned into an error
    assert leases.failures == 1
    assert "could not release a nonce lease" in caplog.text
    # this process still knows it used 0; the address is not stuck
    assert await asyncio.wait_for(book.reserve(ALICE, stale_node), 5) == 1
    await book.release(ALICE, 1)


def test_shared_leases_need_the_chain_key() -> None:
    with pytest.raises(ValueError, match="eip155"):
        NonceBook(leases=LocalNonceLeases())
    assert "shared eip155:1" in repr(NonceBook(leases=LocalNonceLeases(), chain=CHAIN))


async def test_a_reset_floor_rules_every_book_at_once_even_below_what_they_saw() -> None:
    leases = LocalNonceLeases()
    a, b = books(leases)
    for _ in range(3):  # a saw 0, 1, 2 accepted (then, say, the node dropped them)
        await a.accepted(ALICE, await a.reserve(ALICE, stale_node))
    assert await b.floor(ALICE) == 3
    assert await b.reset_floor(ALICE, 1) == 3  # the operator: nonce 1 never landed
    assert (await a.floor(ALICE), await b.floor(ALICE)) == (1, 1)
    assert await a.reserve(ALICE, stale_node) == 1  # a's own memory of 2 does not override
    await a.accepted(ALICE, 1)
    assert await b.reserve(ALICE, stale_node) == 2
    await b.release(ALICE, 2)


async def test_reset_and_floor_wait_for_a_send_in_flight_and_refuse_bad_values() -> None:
    leases = LocalNonceLeases()
    a, b = books(leases)
    assert await a.reserve(ALICE, stale_node) == 0
    resetting = asyncio.ensure_future(b.reset_floor(ALICE, 0))
    await asyncio.sleep(0.05)
    assert not resetting.done()  # never under a send between its nonce and its broadcast
    await a.accepted(ALICE, 0)
    assert await asyncio.wait_for(resetting, 5) == 1
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="whole number"):
            await b.reset_floor(ALICE, bad)  # type: ignore[arg-type]
    assert await b.floor(ALICE) == 0  # unchanged by the refused values
    with pytest.raises(ValueError, match="in its process"):
        await NonceBook().reset_floor(ALICE, 0)


async def test_a_node_that_stays_behind_the_floor_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = LocalNonceLeases()
    (book,) = books(leases, 1)
    await book.accepted(ALICE, await book.reserve(ALICE, stale_node))
    with caplog.at_level(logging.WARNING, logger="walletcore_chains.evm.nonces"):
        await book.release(ALICE, await book.reserve(ALICE, stale_node))  # lagging, once
        assert "wait behind nonce" not in caplog.text
        await book.release(ALICE, await book.reserve(ALICE, stale_node))  # still behind
    assert f"sends from {ALICE} on {CHAIN} wait behind nonce 0" in caplog.text
    assert "walletcore nonces show" in caplog.text


async def test_a_holder_that_renews_its_turn_keeps_it_past_the_lapse() -> None:
    leases = LocalNonceLeases()
    slow = NonceBook(lease=0.2, leases=leases, chain=CHAIN)
    other = NonceBook(leases=leases, chain=CHAIN)
    assert await slow.reserve(ALICE, stale_node) == 0
    slow.renew(ALICE, 0, 1.0)  # waiting for a top-up's receipt, alive
    slow.renew(ALICE, 5, 0.0)  # not the holder's nonce: ignored
    waiting = asyncio.ensure_future(other.reserve(ALICE, stale_node))
    await asyncio.sleep(0.5)  # well past the 0.2 s lapse
    assert not waiting.done() and slow.held(ALICE) == 0
    await slow.accepted(ALICE, 0)
    assert await asyncio.wait_for(waiting, 5) == 1
    await other.release(ALICE, 1)


# -- the gates a book keeps ----------------------------------------------------------------
def addresses(count: int) -> list[str]:
    return [f"0x{n:040x}" for n in range(1, count + 1)]


async def send_once(book: NonceBook, address: str) -> int:
    nonce = await book.reserve(address, stale_node)
    await book.accepted(address, nonce)
    return nonce


async def test_a_book_on_leases_keeps_a_bounded_map_of_gates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that signs for ever more addresses forgets idle gates past the bound; an
    address whose gate was forgotten continues from the lease's floor."""
    monkeypatch.setattr(nonces, "GATES_REMEMBERED", 8)
    (book,) = books(LocalNonceLeases(), 1)
    assert [await send_once(book, ALICE) for _ in range(3)] == [0, 1, 2]
    for address in addresses(40):
        await send_once(book, address)
        assert len(book._gates) <= 8
    assert nonces._key(ALICE) not in book._gates  # forgotten, the oldest
    assert await send_once(book, ALICE) == 3  # the lagging node says 0: the lease rules


class _StuckFloorOf(_StuckFloors):
    """`_StuckFloors` for one address; the others' floors are stored."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = nonces._key(address)

    async def acquire(self, chain: str, address: str) -> NonceLease:
        if address != self.address:
            return await self.inner.acquire(chain, address)
        return await super().acquire(chain, address)


async def test_gates_in_use_are_never_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """A held turn, a reservation waiting for it and a floor that could not be stored
    stay, whatever the bound; idle gates go."""
    monkeypatch.setattr(nonces, "GATES_REMEMBERED", 4)
    bob = "0x" + "b0" * 20
    (book,) = books(_StuckFloorOf(bob), 1)
    await send_once(book, bob)  # accepted, its floor not stored: this process's record
    assert book._gates[nonces._key(bob)].unstored
    held = await book.reserve(ALICE, stale_node)
    waiting = asyncio.ensure_future(book.reserve(ALICE, stale_node))
    await asyncio.sleep(0.01)
    for address in addresses(20):
        await send_once(book, address)
        assert len(book._gates) <= 4 + 2  # the bound, and the two gates in use
    assert book.held(ALICE) == held and nonces._key(bob) in book._gates
    await book.accepted(ALICE, held)
    assert await asyncio.wait_for(waiting, 5) == held + 1
    await book.release(ALICE, held + 1)
    assert await send_once(book, bob) == 1  # its own floor: the lagging node says 0


async def test_without_leases_no_gate_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each gate's floor is then the process's only record of the nonces accepted."""
    monkeypatch.setattr(nonces, "GATES_REMEMBERED", 4)
    book = NonceBook()
    for address in addresses(12):
        await send_once(book, address)
    assert len(book._gates) == 12
