"""`walletcore.testing.chains`: the in-memory gateways are the ports the core asks for
(`FollowedFakeGateway` a `TransferFollower`, `FakeGateway` not, so the core follows it by its
lookup), take only the FAKE KeyStore's addresses, move a transfer's funds once whatever is
broadcast of it, and build a ladder under the cap they are given."""

from __future__ import annotations

import pytest

from walletcore.domain.assets import Chain
from walletcore.domain.errors import BroadcastTimeout, InsufficientFunds, InvalidRequest
from walletcore.ports import (
    FeeQuote,
    MinimumSends,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
)
from walletcore.testing import CONTRACT_CATALOG, FakeGateway, FollowedFakeGateway, Outcome
from walletcore.testing.keys import fake_address

ETH = CONTRACT_CATALOG.asset_by_id(2)
ALICE = fake_address(b"alice", Chain.ETHEREUM)
BOB = fake_address(b"bob", Chain.ETHEREUM)


def test_the_fakes_are_the_ports_the_core_asks_for() -> None:
    followed, plain = FollowedFakeGateway(Chain.ETHEREUM), FakeGateway(Chain.ETHEREUM)
    assert isinstance(followed, TransferFollower) and isinstance(followed, MinimumSends)
    assert not isinstance(plain, TransferFollower) and isinstance(plain, MinimumSends)
    assert FollowedFakeGateway(Chain.SOLANA).resigns and not followed.resigns


def test_only_fake_addresses_of_the_chain_are_taken() -> None:
    gateway = FakeGateway(Chain.ETHEREUM)
    assert gateway.validate_address(ALICE.upper()) == ALICE
    for bad in (fake_address(b"alice", Chain.BSC), "0x52908400098527886E0F7030069857D2E4169EE7", 7):
        with pytest.raises(InvalidRequest):
            gateway.validate_address(bad)


async def signed_transfer(
    gateway: FollowedFakeGateway, cap: int
) -> tuple[SignedTransfer, list[SignedTransfer]]:
    transfer = Transfer(ETH, ALICE, BOB, 100, fee_payer=ALICE)
    unsigned = await gateway.prepare(transfer, FeeQuote(1_000))
    signed = gateway.assemble(unsigned, {ALICE: b"sig"})
    rungs = [
        gateway.assemble(r.unsigned, {ALICE: b"sig"}) for r in gateway.replacements(unsigned, cap)
    ]
    return signed, rungs


async def test_a_transfer_moves_once_whatever_of_it_is_broadcast() -> None:
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    gateway.fund(ALICE, ETH, 10_000)
    signed, rungs = await signed_transfer(gateway, cap=10_000)
    gateway.outcomes.append(Outcome.ANSWER_LOST)
    with pytest.raises(BroadcastTimeout):
        await gateway.broadcast(signed)
    await gateway.broadcast(signed)
    await gateway.broadcast(rungs[0])
    assert gateway.balances[(ALICE, ETH.id)] == 10_000 - 100 - 1_000
    assert gateway.balances[(BOB, ETH.id)] == 100
    assert gateway.sightings[rungs[0].tx_hash] is Sighting.PENDING


async def test_a_transfer_its_sender_cannot_pay_is_refused_at_broadcast() -> None:
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    gateway.fund(ALICE, ETH, 500)
    signed, _ = await signed_transfer(gateway, cap=10_000)
    with pytest.raises(InsufficientFunds):
        await gateway.broadcast(signed)
    assert gateway.accepted == {} and gateway.balances[(ALICE, ETH.id)] == 500


async def test_the_ladder_rises_under_the_cap() -> None:
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    transfer = Transfer(ETH, ALICE, BOB, 100, fee_payer=ALICE)
    unsigned = await gateway.prepare(transfer, FeeQuote(1_000))
    ladder = gateway.replacements(unsigned, 10_000)
    assert [(r.kind, r.fee_units) for r in ladder] == [
        ("bump", 1_251),
        ("bump", 1_564),
        ("bump", 1_956),
        ("cancel", 2_446),
    ]
    assert [r.kind for r in gateway.replacements(unsigned, 1_600)] == ["bump", "bump"]
    assert gateway.replacements(unsigned, 1_000) == []
    assert FollowedFakeGateway(Chain.SOLANA).replacements(unsigned, 10**9) == []
