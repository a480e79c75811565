"""The transfer lifecycle on the core's fakes (walletcore.services.transfers: following,
replacing and the operator, through `Transfers`; docs/transfers.md), driven as the
`follow_sends` job, a `/send` replay and the operator drive it: settled once with its audit
entry; a stuck send bumped from its pre-signed ladder within the fee cap; a dropped one
broadcast again, then refilled by the next rung; an expired one re-signed where the gateway
re-signs; every move a compare-and-set on the transfer's current hash (a move that lost
changes nothing); node errors leave the transfer for the next run. The signing and the
moves on their own: test_transfer_signing.py, test_transfer_moves.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from walletcore.domain.assets import CONTRACT_CHAINS, Chain, FeePayer
from walletcore.domain.errors import DomainError, NodeUnavailable, TransferRejected
from walletcore.domain.sends import ChainStatus
from walletcore.ports import Sighting
from walletcore.services.send_record import SignedSend
from walletcore.services.transfers import Followed
from walletcore.testing.chains import FollowedFakeGateway

from .conftest import ETH, PASSWORD, SOL, TRX, WRONG, Desk, DeskFactory, units, until

STUCK = 60  # the fakes' stuck time, seconds
ETH_FEE = units(ETH, "0.00042")
DEFAULT_ETH_CAP = units(ETH, "0.005")


async def refused(call: Any) -> DomainError:
    with pytest.raises(DomainError) as caught:
        await call
    return caught.value


async def eth_send(desk: Desk, request_id: str = "send-1") -> tuple[str, str]:
    """A user's 0.5 ETH send, accepted: (user id, its first hash)."""
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "2")
    receipt = await desk.send(user, ETH, "0.5", request_id=request_id)
    return user, receipt.tx_hash


async def lifecycle(desk: Desk) -> list[tuple[str, str | None, str | None]]:
    """The lifecycle's audit entries, oldest first: (action, target, detail)."""
    return [
        (e.action, e.target, e.detail) for e in await desk.audit() if e.action.startswith("send.")
    ]


# -- settling -------------------------------------------------------------------------------
async def test_a_pending_send_stays_pending_and_goes_behind_the_others(desk: Desk) -> None:
    _, first = await eth_send(desk)
    desk.clock.advance(5)
    assert await desk.follow() == 0
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, first)
    assert record.chain_checked_at == desk.clock.now()
    assert desk.gateway(ETH).asked == [first]
    assert await lifecycle(desk) == []


async def test_a_mined_send_settles_once_with_its_audit_entry(desk: Desk) -> None:
    user, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.SUCCESS
    desk.clock.advance(30)
    assert await desk.follow() == 1
    record = await desk.record()
    assert (record.chain_status, record.chain_final_at) == (ChainStatus.SUCCESS, desk.clock.now())
    (entry,) = await desk.audit("send.settle")
    assert (entry.outcome, entry.target, entry.user_id, entry.client_id, entry.detail) == (
        "ok",
        first,
        user,
        desk.client.client_id,
        "pending -> success",
    )
    asked = len(eth.asked)
    assert await desk.follow() == 0  # final: never asked again, never settled again
    assert len(eth.asked) == asked
    assert len(await desk.audit("send.settle")) == 1
    replay = await desk.send(user, ETH, "0.5")
    assert (replay.tx_hash, replay.status) == (first, "success")


async def test_a_reverted_send_settles_failed(desk: Desk) -> None:
    user, first = await eth_send(desk)
    desk.gateway(ETH).sightings[first] = Sighting.FAILED
    assert await desk.follow() == 1
    assert (await desk.record()).chain_status is ChainStatus.FAILED
    assert await lifecycle(desk) == [("send.settle", first, "pending -> failed")]
    assert (await desk.send(user, ETH, "0.5")).status == "failed"


async def test_a_transfer_whose_place_another_transaction_took_fails(desk: Desk) -> None:
    _, first = await eth_send(desk)
    desk.gateway(ETH).sightings[first] = Sighting.CONFLICT
    assert await desk.follow() == 1
    assert (await desk.record()).chain_status is ChainStatus.FAILED
    assert await lifecycle(desk) == [
        (
            "send.settle",
            first,
            "pending -> failed (its place was taken by a transaction this service did not send)",
        )
    ]


async def test_an_expired_send_on_a_chain_that_never_resigns_fails(desk: Desk) -> None:
    _, first = await eth_send(desk)
    desk.gateway(ETH).sightings[first] = Sighting.EXPIRED
    assert await desk.follow() == 1
    assert (await desk.record()).chain_status is ChainStatus.FAILED
    assert await lifecycle(desk) == [
        ("send.settle", first, "pending -> failed (expired: it can never land)")
    ]


# -- stuck: bumped from the ladder -----------------------------------------------------------
async def test_a_send_is_signed_with_its_ladder_under_the_cap(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    signed = await desk.signed()
    assert eth.caps == [DEFAULT_ETH_CAP]
    assert [r.kind for r in signed.ladder] == ["bump", "bump", "bump", "cancel"]
    fees = [signed.fee_units, *(r.fee_units for r in signed.ladder)]
    assert fees == sorted(set(fees)) and fees[-1] <= DEFAULT_ETH_CAP
    assert all(r.at is None for r in signed.ladder)  # signed, never broadcast
    assert eth.broadcasts == [first]
    cancel = eth.body_of(signed.ladder[-1].tx_hash)
    assert (cancel["to"], cancel["amount"]) == (cancel["from"], 0)


async def test_a_stuck_send_is_bumped_and_stays_one_transfer(desk: Desk) -> None:
    user, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    ladder = (await desk.signed()).ladder
    desk.clock.advance(STUCK - 1)
    await desk.follow()
    assert (await desk.record()).tx_hash == first  # not stuck yet
    desk.clock.advance(1)
    await desk.follow()
    record = await desk.record()
    signed = SignedSend.from_bytes(record.raw_tx)
    bump = ladder[0]
    assert record.chain_status is ChainStatus.STUCK
    assert (signed.kind, signed.tx_hash, signed.fee_units) == ("bump", bump.tx_hash, bump.fee_units)
    assert [a.tx_hash for a in signed.earlier] == [first]
    assert [r.kind for r in signed.ladder] == ["bump", "bump", "cancel"]
    assert eth.broadcasts == [first, bump.tx_hash]
    assert await lifecycle(desk) == [
        ("send.replace", bump.tx_hash, f"bump {first} -> {bump.tx_hash}, fee {bump.fee_units}")
    ]
    replay = await desk.send(user, ETH, "0.5")  # the transfer as it stands, nothing sent
    assert (replay.tx_hash, replay.status) == (bump.tx_hash, "pending")
    assert replay.fee == "0.000525000000000001"
    assert len(eth.broadcasts) == 2


async def test_a_replacement_is_stored_with_its_audit_entry_before_it_is_broadcast(
    desk: Desk,
) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    bump = (await desk.signed()).ladder[0].tx_hash
    gate = eth.holds["broadcast"] = asyncio.Event()
    desk.clock.advance(STUCK)
    run = asyncio.create_task(desk.follow())
    await until(lambda: eth.broadcasts[-1:] == [bump])
    at_broadcast = await desk.record()
    replaced = await desk.audit("send.replace")
    gate.set()
    await run
    assert (at_broadcast.tx_hash, at_broadcast.chain_status) == (bump, ChainStatus.STUCK)
    assert [e.target for e in replaced] == [bump]
    assert eth.broadcasts == [first, bump]


async def test_bumps_stop_at_the_fee_cap(make_desk: DeskFactory) -> None:
    desk = await make_desk(fee_caps={Chain.ETHEREUM: "0.0007"})
    cap = units(ETH, "0.0007")
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    signed = await desk.signed()
    assert eth.caps == [cap]
    assert [r.kind for r in signed.ladder] == ["bump", "bump"]  # the third, the cancel: over
    for _ in range(3):
        desk.clock.advance(STUCK)
        await desk.follow()
    record = await desk.record()
    final = SignedSend.from_bytes(record.raw_tx)
    assert record.chain_status is ChainStatus.STUCK
    assert final.tx_hash == signed.ladder[-1].tx_hash and final.ladder == ()
    assert eth.broadcasts == [first, *(r.tx_hash for r in signed.ladder)]
    assert all(a.fee_units <= cap for a in final.attempts)
    assert len(await desk.audit("send.replace")) == 2


async def test_with_no_rung_under_the_cap_a_stuck_send_is_marked_and_left(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(fee_caps={Chain.ETHEREUM: "0.0005"})  # below the first rung
    _, first = await eth_send(desk)
    assert (await desk.signed()).ladder == ()
    desk.clock.advance(STUCK)
    await desk.follow()
    await desk.follow()  # stuck still: nothing more to write
    assert (await desk.record()).chain_status is ChainStatus.STUCK
    assert await lifecycle(desk) == [("send.stuck", first, "pending -> stuck")]
    assert desk.gateway(ETH).broadcasts == [first]


async def test_a_gateway_rung_over_the_cap_is_refused_and_nothing_is_signed(
    make_desk: DeskFactory,
) -> None:
    buggy = {chain: FollowedFakeGateway(chain, ignores_cap=True) for chain in CONTRACT_CHAINS}
    desk = await make_desk(gateways=buggy, fee_caps={Chain.ETHEREUM: "0.0005"})
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "1")
    error = await refused(desk.send(user, ETH, "0.5"))
    assert (error.status, error.message) == (
        500,
        "a replacement's fee crosses the cap; nothing was signed",
    )
    eth = desk.gateway(ETH)
    assert (eth.assembled, eth.broadcasts, eth.released) == ([], [], eth.prepared)
    assert (await desk.record()).locked_until is None


async def test_manual_fee_bumping_leaves_a_stuck_send_to_the_operator(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(fee_bump="manual")
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    await desk.follow()
    assert (await desk.record()).chain_status is ChainStatus.STUCK
    assert eth.broadcasts == [first]
    shown = await desk.transfers.replace(
        desk.client.client_id, "send-1", cancel=False, request_id_audit="op-1"
    )
    bump = shown["current"]["txHash"]
    assert (shown["current"]["kind"], shown["earlier"][0]["txHash"]) == ("bump", first)
    assert eth.broadcasts == [first, bump]
    (replaced,) = await desk.audit("send.replace")
    assert (replaced.request_id, replaced.detail) == (
        "op-1",
        f"bump {first} -> {bump}, fee {shown['current']['feeUnits']} (operator)",
    )
    assert "raw" not in repr(shown)


# -- dropped: broadcast again, then refilled --------------------------------------------------
async def test_a_dropped_send_is_broadcast_again_as_the_same_bytes(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.MISSING  # evicted from the mempool
    await desk.follow()
    assert eth.broadcasts == [first, first]
    assert eth.sightings[first] is Sighting.PENDING  # the node holds it again
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, first)
    assert await lifecycle(desk) == [
        ("send.rebroadcast", first, "dropped by the node; broadcast again")
    ]


async def test_a_dropped_send_refused_again_is_refilled_by_the_next_bump(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    bump = (await desk.signed()).ladder[0]
    eth.sightings[first] = Sighting.MISSING
    eth.refuse[first] = TransferRejected("Transfer rejected by the network: underpriced")
    await desk.follow()
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.DROPPED, bump.tx_hash)
    assert eth.broadcasts == [first, first, bump.tx_hash]
    assert await lifecycle(desk) == [
        ("send.replace", bump.tx_hash, f"bump {first} -> {bump.tx_hash}, fee {bump.fee_units}")
    ]


async def test_a_dropped_send_with_every_bump_refused_is_cancelled(desk: Desk) -> None:
    user, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    ladder = (await desk.signed()).ladder
    for tx_hash in (first, *(r.tx_hash for r in ladder if r.kind == "bump")):
        eth.refuse[tx_hash] = TransferRejected("Transfer rejected by the network: underpriced")
    eth.sightings[first] = Sighting.MISSING
    for _ in range(4):
        await desk.follow()
    signed = await desk.signed()
    assert (signed.kind, signed.tx_hash, signed.ladder) == ("cancel", ladder[-1].tx_hash, ())
    eth.sightings[signed.tx_hash] = Sighting.SUCCESS  # the cancel is mined: nothing was sent
    assert await desk.follow() == 1
    assert (await desk.record()).chain_status is ChainStatus.FAILED
    (settle,) = await desk.audit("send.settle")
    assert settle.detail is not None and settle.detail.endswith("-> failed (cancelled)")
    replay = await desk.send(user, ETH, "0.5")
    assert (replay.tx_hash, replay.status) == (signed.tx_hash, "failed")


async def test_a_dropped_send_with_nothing_left_to_refill_it_is_marked_dropped(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(fee_bump="manual")
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.MISSING
    eth.refuse[first] = TransferRejected("Transfer rejected by the network: underpriced")
    await desk.follow()
    await desk.follow()  # dropped still: nothing more to write
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.DROPPED, first)
    assert await lifecycle(desk) == [("send.dropped", first, "pending -> dropped")]
    assert eth.broadcasts == [first, first, first]  # the same bytes tried each run


async def test_a_re_broadcast_refused_for_funds_is_a_refusal_and_is_refilled(
    desk: Desk,
) -> None:
    from walletcore.domain.errors import InsufficientFunds

    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.MISSING
    eth.refuse[first] = InsufficientFunds("Insufficient funds for gas; nothing was sent")
    await desk.follow()
    record = await desk.record()
    assert record.chain_status is ChainStatus.DROPPED
    assert record.tx_hash != first  # the next rung took its place


# -- which transaction of the transfer is mined ------------------------------------------------
async def test_a_mined_bump_settles_the_transfer_under_its_hash(desk: Desk) -> None:
    user, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    await desk.follow()
    bump = (await desk.signed()).tx_hash
    eth.sightings[bump] = Sighting.SUCCESS
    eth.sightings[first] = Sighting.CONFLICT
    assert await desk.follow() == 1
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.SUCCESS, bump)
    (settle,) = await desk.audit("send.settle")
    assert (settle.target, settle.detail) == (bump, "stuck -> success")
    replay = await desk.send(user, ETH, "0.5")
    assert (replay.tx_hash, replay.status) == (bump, "success")


async def test_the_first_transaction_mined_after_a_bump_settles_the_transfer(
    desk: Desk,
) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    await desk.follow()
    bump = (await desk.signed()).tx_hash
    eth.sightings[bump] = Sighting.CONFLICT  # the original won the race
    eth.sightings[first] = Sighting.SUCCESS
    assert await desk.follow() == 1
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.SUCCESS, first)
    signed = SignedSend.from_bytes(record.raw_tx)
    assert signed.kind == "send" and [a.tx_hash for a in signed.earlier] == [bump]
    (settle,) = await desk.audit("send.settle")
    assert settle.target == first


async def test_an_earlier_transaction_that_may_still_land_keeps_the_transfer_pending(
    desk: Desk,
) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    await desk.follow()
    bump = (await desk.signed()).tx_hash
    eth.sightings[bump] = Sighting.CONFLICT
    eth.sightings[first] = Sighting.PENDING  # mined, not at the chain's depth yet
    assert await desk.follow() == 0
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, bump)
    assert await desk.audit("send.settle") == []


# -- node errors ----------------------------------------------------------------------------
async def test_a_node_that_cannot_be_asked_leaves_the_transfer_for_the_next_run(
    desk: Desk,
) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    before = await desk.record()
    eth.errors["sighting"] = NodeUnavailable()
    desk.clock.advance(STUCK + 1)
    assert await desk.follow() == 0
    after = await desk.record()
    assert (after.chain_status, after.tx_hash, after.raw_tx) == (
        before.chain_status,
        before.tx_hash,
        before.raw_tx,
    )
    assert after.chain_checked_at == desk.clock.now()  # behind the others next run
    assert await lifecycle(desk) == []
    assert eth.broadcasts == [first]
    del eth.errors["sighting"]
    eth.sightings[first] = Sighting.SUCCESS
    assert await desk.follow() == 1


async def test_a_re_broadcast_the_node_could_not_take_changes_nothing(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.MISSING
    eth.outcomes.append(NodeUnavailable())
    assert await desk.follow() == 0
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, first)
    assert await lifecycle(desk) == []
    await desk.follow()  # the node is back: broadcast again
    assert eth.broadcasts == [first, first, first]
    assert eth.sightings[first] is Sighting.PENDING


async def test_a_rung_stored_but_not_broadcast_is_broadcast_by_the_next_run(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    eth.outcomes.append(NodeUnavailable())  # the bump's broadcast fails
    await desk.follow()
    bump = (await desk.signed()).tx_hash
    assert bump != first and bump not in eth.accepted  # stored, never reached the node
    await desk.follow()
    assert eth.broadcasts == [first, bump, bump]
    assert bump in eth.accepted
    assert [a for a, _, _ in await lifecycle(desk)] == ["send.replace", "send.rebroadcast"]


# -- compare-and-set on the current hash -------------------------------------------------------
async def test_a_replacement_that_lost_the_race_changes_and_sends_nothing(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    stale = await desk.record()
    desk.clock.advance(STUCK)
    assert await desk.transfers.follow(stale, "job-a") is Followed.MOVED
    moved = await desk.record()
    assert await desk.transfers.follow(stale, "job-b") is Followed.LOST
    assert await desk.record() == moved
    assert eth.broadcasts == [first, moved.tx_hash]
    assert [e.request_id for e in await desk.audit("send.replace")] == ["job-a"]


async def test_a_send_is_settled_once_however_many_runs_ask(desk: Desk) -> None:
    _, first = await eth_send(desk)
    desk.gateway(ETH).sightings[first] = Sighting.SUCCESS
    stale = await desk.record()
    assert await desk.transfers.follow(stale, "job-a") is Followed.SETTLED
    assert await desk.transfers.follow(stale, "job-b") is Followed.LOST
    assert [e.request_id for e in await desk.audit("send.settle")] == ["job-a"]


async def test_three_follow_runs_at_once_store_one_replacement(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    desk.clock.advance(STUCK)
    jobs = desk.container.jobs()
    await asyncio.gather(jobs.follow_sends(), jobs.follow_sends(), jobs.follow_sends())
    assert len(await desk.audit("send.replace")) == 1
    assert eth.broadcasts == [first, (await desk.signed()).tx_hash]


# -- re-signing (SOLANA, TRON) ------------------------------------------------------------------
async def sol_platform_send(desk: Desk) -> str:
    platform = (await desk.platform())[Chain.SOLANA]
    desk.fund(platform, SOL, "2")
    return (await desk.platform_send(SOL, "0.5")).tx_hash


async def test_an_expired_platform_send_is_resigned_by_the_job(desk: Desk) -> None:
    first = await sol_platform_send(desk)
    sol = desk.gateway(SOL)
    assert (await desk.signed("psend-1")).ladder == () and sol.caps == []  # re-signs instead
    sol.sightings[first] = Sighting.EXPIRED
    assert await desk.follow() == 0
    record = await desk.record("psend-1")
    signed = SignedSend.from_bytes(record.raw_tx)
    assert record.chain_status is ChainStatus.PENDING
    assert (signed.kind, [a.tx_hash for a in signed.earlier]) == ("resign", [first])
    assert len(sol.prepared) == 2  # built again: a fresh quote and blockhash
    assert sol.broadcasts == [first, signed.tx_hash]
    (entry,) = await desk.audit("send.resign")
    assert (entry.user_id, entry.target, entry.detail) == (
        None,
        signed.tx_hash,
        f"expired {first} -> {signed.tx_hash}, fee {signed.fee_units}",
    )


async def test_a_send_that_may_still_land_is_broadcast_again_never_resigned(
    desk: Desk,
) -> None:
    first = await sol_platform_send(desk)
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.MISSING  # lost, its blockhash still valid
    await desk.follow()
    assert (len(sol.prepared), sol.broadcasts) == (1, [first, first])
    error = await refused(
        desk.transfers.replace(
            desk.client.client_id, "psend-1", cancel=False, request_id_audit="op"
        )
    )
    assert error.status == 400 and "provably never land" in error.message


async def test_an_expired_user_send_waits_for_the_clients_replay_with_the_password(
    desk: Desk,
) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, SOL), SOL, "2")
    first = (await desk.send(user, SOL, "0.5")).tx_hash
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    await desk.follow()
    await desk.follow()
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.DROPPED, first)
    assert await lifecycle(desk) == [("send.dropped", first, "pending -> dropped")]
    assert (len(sol.prepared), sol.broadcasts) == (1, [first])  # never without the password
    # a replay with a wrong password signs nothing
    error = await refused(desk.send(user, SOL, "0.5", password=WRONG))
    assert (error.status, error.message) == (401, "Invalid password")
    assert sol.broadcasts == [first] and sol.released == sol.prepared[1:]
    # with the password: re-signed, stored, broadcast
    again = await desk.send(user, SOL, "0.5", password=PASSWORD)
    assert again.tx_hash != first and again.status == "pending"
    assert sol.broadcasts == [first, again.tx_hash]
    assert (await desk.record()).chain_status is ChainStatus.PENDING
    (entry,) = await desk.audit("send.resign")
    assert (entry.user_id, entry.target) == (user, again.tx_hash)
    # a replay while the new one is live re-signs nothing
    third = await desk.send(user, SOL, "0.5")
    assert third.tx_hash == again.tx_hash and len(sol.broadcasts) == 2


async def test_two_replays_at_once_store_one_resigned_transaction(desk: Desk) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, SOL), SOL, "2")
    first = (await desk.send(user, SOL, "0.5")).tx_hash
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    await desk.follow()
    gate = sol.holds["prepare"] = asyncio.Event()
    replays = [asyncio.create_task(desk.send(user, SOL, "0.5")) for _ in range(2)]
    # both re-sign from the same record, held at `prepare`
    await until(lambda: sum(c[0] == "prepare" for c in sol.calls) == 3)
    gate.set()
    answers = await asyncio.gather(*replays)
    stored = (await desk.record()).tx_hash
    assert [a.tx_hash for a in answers] == [stored, stored]
    assert sol.broadcasts == [first, stored]  # the loser's transaction never left
    assert len(sol.released) == 1 and len(await desk.audit("send.resign")) == 1


async def test_a_wrong_password_on_a_tron_replay_is_the_chains_401(desk: Desk) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, TRX), TRX, "50")
    first = (await desk.send(user, TRX, "10")).tx_hash
    desk.gateway(TRX).sightings[first] = Sighting.EXPIRED
    await desk.follow()
    error = await refused(desk.send(user, TRX, "10", password=WRONG))
    assert (error.status, error.message) == (401, "Invalid credentials")
    assert desk.gateway(TRX).broadcasts == [first]


async def test_a_resign_over_the_fee_cap_is_502_and_sends_nothing(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(fee_caps={Chain.SOLANA: "0.000001"})  # 1,000 lamports
    user = await desk.user()
    desk.fund(desk.address(user, SOL), SOL, "2")
    first = (await desk.send(user, SOL, "0.5")).tx_hash
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    await desk.follow()
    error = await refused(desk.send(user, SOL, "0.5"))
    assert (error.status, error.message) == (
        502,
        (
            "Transfer rejected: re-signing it would cost more than the fee cap "
            "(5000 > 1000 base units); nothing was sent"
        ),
    )
    record = await desk.record()
    assert (record.chain_status, record.tx_hash) == (ChainStatus.DROPPED, first)
    assert (len(sol.prepared), sol.broadcasts) == (1, [first])


async def test_an_expired_platform_send_over_the_cap_is_left_and_sends_nothing(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(fee_caps={Chain.SOLANA: "0.000001"})
    first = await sol_platform_send(desk)
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    assert await desk.follow() == 0
    record = await desk.record("psend-1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, first)
    assert (len(sol.prepared), sol.broadcasts) == (1, [first])
    assert await lifecycle(desk) == []


async def test_a_resign_that_lost_the_race_is_given_back_and_never_broadcast(
    desk: Desk,
) -> None:
    first = await sol_platform_send(desk)
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    stale = await desk.record("psend-1")
    assert await desk.transfers.follow(stale, "job-a") is Followed.MOVED
    resigned = (await desk.record("psend-1")).tx_hash
    assert await desk.transfers.follow(stale, "job-b") is Followed.LOST
    assert sol.broadcasts == [first, resigned]
    assert sol.released == sol.prepared[2:]  # the loser's transaction, given back
    assert len(await desk.audit("send.resign")) == 1


async def test_a_sponsored_user_send_is_resigned_with_the_platform_as_fee_payer(
    desk: Desk,
) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.SOLANA]
    desk.fund(platform, SOL, "1")
    user = await desk.user()
    sender = desk.address(user, SOL)
    desk.fund(sender, SOL, "1")
    first = (await desk.send(user, SOL, "0.5")).tx_hash
    sol = desk.gateway(SOL)
    sol.sightings[first] = Sighting.EXPIRED
    await desk.follow()
    again = await desk.send(user, SOL, "0.5")
    assert again.fee_payer is FeePayer.PLATFORM
    resigned = sol.prepared[-1].transfer
    assert (resigned.fee_payer, resigned.signers) == (platform, (platform, sender))
    assert sol.broadcasts == [first, again.tx_hash]


# -- a gateway without the lifecycle (the sandbox's kind) ----------------------------------------
async def test_a_gateway_without_the_lifecycle_is_followed_by_its_lookup(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(followed=False)
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "1")
    first = (await desk.send(user, ETH, "0.5")).tx_hash
    eth = desk.gateways[Chain.ETHEREUM]
    assert (await desk.signed()).ladder == ()
    assert await desk.follow() == 0
    eth.errors["lookup"] = NodeUnavailable()
    assert await desk.follow() == 0
    assert (await desk.record()).chain_status is ChainStatus.PENDING
    del eth.errors["lookup"]
    eth.confirm(first, "success")
    assert await desk.follow() == 1
    assert (await desk.record()).chain_status is ChainStatus.SUCCESS
    assert await lifecycle(desk) == [("send.settle", first, "pending -> success")]


# -- the operator ----------------------------------------------------------------------------
async def test_the_operators_cancel_broadcasts_the_cancel_rung(desk: Desk) -> None:
    _, first = await eth_send(desk)
    eth = desk.gateway(ETH)
    cancel = (await desk.signed()).ladder[-1]
    shown = await desk.transfers.replace(
        desk.client.client_id, "send-1", cancel=True, request_id_audit="op-1"
    )
    assert (shown["current"]["kind"], shown["current"]["txHash"]) == ("cancel", cancel.tx_hash)
    assert shown["ladder"] == []
    assert eth.broadcasts == [first, cancel.tx_hash]


async def test_the_operator_is_refused_what_cannot_be_done(make_desk: DeskFactory) -> None:
    desk = await make_desk(fee_caps={Chain.ETHEREUM: "0.0005"})  # no rung under the cap
    user, first = await eth_send(desk)
    replace = desk.transfers.replace
    client_id = desk.client.client_id
    no_bump = await refused(replace(client_id, "send-1", cancel=False, request_id_audit="op"))
    assert (no_bump.status, no_bump.message) == (
        400,
        (
            "send send-1 has no bump left under its fee cap (`WALLETCORE_FEE_CAPS`, when it was "
            "signed)"
        ),
    )
    desk.gateway(ETH).sightings[first] = Sighting.SUCCESS
    await desk.follow()
    final = await refused(replace(client_id, "send-1", cancel=True, request_id_audit="op"))
    assert (final.status, final.message) == (
        400,
        "send send-1 is not followed or already final (success): nothing to replace",
    )
    # a user's expired SOLANA send is re-signed by the client's replay, not the operator
    desk.fund(desk.address(user, SOL), SOL, "2")
    sol_first = (await desk.send(user, SOL, "0.5", request_id="sol-1")).tx_hash
    desk.gateway(SOL).sightings[sol_first] = Sighting.EXPIRED
    user_send = await refused(replace(client_id, "sol-1", cancel=False, request_id_audit="op"))
    assert user_send.message == (
        "a user's transfer is re-signed with the user's password: the client replays its "
        "/send with the same X-Request-Id"
    )
    # but an expired one can be ended: it can never land
    shown = await replace(client_id, "sol-1", cancel=True, request_id_audit="op")
    assert (shown["chainStatus"], shown["status"]) == ("failed", "failed")
