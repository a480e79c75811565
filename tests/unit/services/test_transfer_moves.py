"""The record's moves on the core's fakes (walletcore.services.transfers.moves,
docs/transfers.md): each a compare-and-set on the transfer's current hash, stored with its
audit entry; a move that lost changes nothing; marking the state it has already stores
nothing; settling names why; the chain is asked the current transaction first and, while
the node holds it, nothing earlier."""

from __future__ import annotations

from walletcore.domain.sends import ChainStatus
from walletcore.ports import Sighting
from walletcore.services.send_record import SignedSend
from walletcore.services.transfers.moves import SEND_SETTLE, Followed, Moves
from walletcore.testing import CONTRACT_CATALOG

from .conftest import ETH, Desk


async def followed_send(desk: Desk) -> SignedSend:
    """A user's 0.5 ETH send, accepted and followed (`pending`): the transfer as signed."""
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "2")
    await desk.send(user, ETH, "0.5")
    return await desk.signed()


async def test_a_mark_is_stored_with_its_audit_entry_and_only_once(desk: Desk) -> None:
    signed = await followed_send(desk)
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    record = await desk.record()
    desk.clock.advance(90)
    assert await moves.mark(record, signed, ChainStatus.STUCK, "job-1") is Followed.MOVED
    stuck = await desk.record()
    assert (stuck.chain_status, stuck.chain_checked_at) == (ChainStatus.STUCK, desk.clock.now())
    (entry,) = await desk.audit("send.stuck")
    assert (entry.request_id, entry.target, entry.detail) == (
        "job-1",
        signed.tx_hash,
        "pending -> stuck",
    )
    # the same state again: nothing stored, nothing audited
    assert await moves.mark(stuck, signed, ChainStatus.STUCK, "job-2") is Followed.PENDING
    assert len(await desk.audit("send.stuck")) == 1


async def test_pending_is_stored_without_an_audit_entry(desk: Desk) -> None:
    signed = await followed_send(desk)
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    await moves.mark(await desk.record(), signed, ChainStatus.STUCK, "job-1")
    desk.clock.advance(5)
    before = len(await desk.audit())
    back = await moves.mark(await desk.record(), signed, ChainStatus.PENDING, "job-2")
    assert back is Followed.MOVED
    assert (await desk.record()).chain_status is ChainStatus.PENDING
    assert len(await desk.audit()) == before


async def test_a_move_from_a_stale_record_is_lost_and_changes_nothing(desk: Desk) -> None:
    signed = await followed_send(desk)
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    stale = await desk.record()
    await moves.mark(stale, signed, ChainStatus.STUCK, "job-a")
    lost = await moves.settle(stale, signed, signed.current, Sighting.SUCCESS, "job-b")
    assert lost is Followed.LOST
    assert (await desk.record()).chain_status is ChainStatus.STUCK
    assert await desk.audit(SEND_SETTLE) == []


async def test_settling_names_why_the_transfer_ended(desk: Desk) -> None:
    signed = await followed_send(desk)
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    record = await desk.record()
    desk.clock.advance(30)
    outcome = await moves.settle(record, signed, signed.current, Sighting.CONFLICT, "job-1")
    assert outcome is Followed.SETTLED
    settled = await desk.record()
    assert (settled.chain_status, settled.chain_final_at) == (
        ChainStatus.FAILED,
        desk.clock.now(),
    )
    assert settled.tx_hash == signed.tx_hash  # its own transaction: not moved
    (entry,) = await desk.audit(SEND_SETTLE)
    assert entry.detail == (
        "pending -> failed (its place was taken by a transaction this service did not send)"
    )


async def test_a_mined_cancel_settles_the_transfer_failed_under_the_cancels_hash(
    desk: Desk,
) -> None:
    signed = await followed_send(desk)
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    cancel = signed.next_rung("cancel")
    assert cancel is not None
    outcome = await moves.settle(await desk.record(), signed, cancel, Sighting.SUCCESS, "job-1")
    assert outcome is Followed.SETTLED
    settled = await desk.record()
    assert (settled.chain_status, settled.tx_hash) == (ChainStatus.FAILED, cancel.tx_hash)
    moved = SignedSend.from_bytes(settled.raw_tx)
    assert (moved.kind, [a.tx_hash for a in moved.earlier]) == ("cancel", [signed.tx_hash])
    (entry,) = await desk.audit(SEND_SETTLE)
    assert (entry.target, entry.detail) == (cancel.tx_hash, "pending -> failed (cancelled)")


async def test_the_chain_is_asked_the_current_transaction_first(desk: Desk) -> None:
    signed = await followed_send(desk)
    eth = desk.gateway(ETH)
    bump = signed.next_rung("bump")
    assert bump is not None
    bumped = signed.moved_to(bump, desk.clock.now())
    moves = Moves(desk.storage, desk.clock, CONTRACT_CATALOG)
    asset = CONTRACT_CATALOG.asset_by_id(ETH)
    eth.sightings[bump.tx_hash] = Sighting.PENDING
    eth.asked.clear()
    seen = await moves.sightings(eth, bumped, asset, stop_at_pending=True)
    # the node holds the current one: the earlier one is not asked
    assert [(a.tx_hash, s) for a, s in seen] == [(bump.tx_hash, Sighting.PENDING)]
    eth.asked.clear()
    seen = await moves.sightings(eth, bumped, asset, stop_at_pending=False)
    assert [a.tx_hash for a, _ in seen] == [bump.tx_hash, signed.tx_hash]
    assert eth.asked == [bump.tx_hash, signed.tx_hash]
    # a final one ends the asking
    eth.sightings[bump.tx_hash] = Sighting.SUCCESS
    seen = await moves.sightings(eth, bumped, asset, stop_at_pending=False)
    assert [(a.tx_hash, s) for a, s in seen] == [(bump.tx_hash, Sighting.SUCCESS)]
