"""`WalletReads` on the core's fakes (walletcore.services.wallet_reads): `/fee` quotes the
send that would follow (its fee payer rule and the chain's minimum included) and signs or
stores nothing; `/txid` of any hash a followed transfer had answers the transfer's outcome
(docs/transfers.md, "One X-Request-Id, one transfer")."""

from __future__ import annotations

from typing import Any

import pytest

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import DomainError, TransactionNotFound, TransferRejected
from walletcore.ports import FeeQuote, SendMinimum, Sighting

from .conftest import BTC, ETH, SOL, TRC_USDT, USDT, Desk, elsewhere, units

DUST = SendMinimum(294, "the dust limit of its address type")


async def refused(call: Any) -> DomainError:
    with pytest.raises(DomainError) as caught:
        await call
    return caught.value


async def fee(desk: Desk, user: str | None, asset_id: int, **body: Any) -> FeeQuote:
    answer = await desk.reads.fee(
        desk.caller(), asset_id=asset_id, user_id=user, platform=user is None, **body
    )
    quote: FeeQuote = answer.quote
    return quote


def to(chain: Chain) -> str:
    """The recipient of these quotes on `chain`."""
    return elsewhere(chain)


# -- /fee -----------------------------------------------------------------------------------
async def test_fee_quotes_the_users_send_and_signs_or_stores_nothing(desk: Desk) -> None:
    user = await desk.user()
    native = await fee(desk, user, ETH, recipient=to(Chain.ETHEREUM))
    token = await fee(desk, user, USDT, recipient=to(Chain.ETHEREUM), amount="5")
    assert (native.native_units, token.native_units) == (
        units(ETH, "0.00042"),
        units(ETH, "0.0013"),
    )
    eth = desk.gateway(ETH)
    sender = desk.address(user, ETH)
    assert ("fee", sender, to(Chain.ETHEREUM), str(ETH), "None") in eth.calls
    assert (eth.prepared, eth.broadcasts) == ([], [])
    assert await desk.db.sends.get(desk.client.client_id, "send-1") is None


async def test_fee_keeps_trons_bandwidth_and_energy(desk: Desk) -> None:
    user = await desk.user()
    quote = FeeQuote(13_995_000, bandwidth=345, energy=65_000)
    desk.gateway(TRC_USDT).fees[TRC_USDT] = quote
    assert await fee(desk, user, TRC_USDT, recipient=to(Chain.TRON)) == quote


async def test_fee_quotes_the_sponsored_send_when_the_platform_can_pay(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    user = await desk.user()
    # no platform wallet yet: the USER quote (one signature)
    assert (await fee(desk, user, SOL, recipient=to(Chain.SOLANA))).native_units == 5_000
    platform = (await desk.platform())[Chain.SOLANA]
    # a platform wallet short of SOL: still the USER quote
    assert (await fee(desk, user, SOL, recipient=to(Chain.SOLANA))).native_units == 5_000
    desk.fund(platform, SOL, "1")
    sponsored = await fee(desk, user, SOL, recipient=to(Chain.SOLANA))
    assert sponsored.native_units == 10_000  # two signatures
    sol = desk.gateway(SOL)
    sender = desk.address(user, SOL)
    assert ("fee", sender, to(Chain.SOLANA), str(SOL), platform) in sol.calls


async def test_fee_with_an_amount_refuses_one_below_the_minimum_as_the_send_would(
    desk: Desk,
) -> None:
    user = await desk.user()
    desk.gateway(BTC).minimums[BTC] = DUST
    btc = to(Chain.BITCOIN)
    below = await refused(fee(desk, user, BTC, recipient=btc, amount="0.00000293"))
    assert (below.status, below.message) == (
        400,
        (
            "amount is below the minimum send of 0.00000294 BTC to this recipient "
            "(the dust limit of its address type)"
        ),
    )
    taken = await refused(fee(desk, user, BTC, recipient=btc, amount="0.00001"))
    assert taken.message.startswith("amount must be at least 0.00001704 BTC")
    assert (await fee(desk, user, BTC, recipient=btc)).native_units == 1_410  # no amount
    await desk.platform()
    platform = await refused(fee(desk, None, BTC, recipient=btc, amount="0.00000293"))
    assert (platform.status, platform.message) == (400, below.message)
    # the platform pays its fee on top: the whole amount reaches the recipient
    on_top = await fee(desk, None, BTC, recipient=btc, amount="0.00001")
    assert on_top.native_units == 1_410


async def test_fee_of_the_platform_wallet_quotes_its_own_send(desk: Desk) -> None:
    missing = await refused(fee(desk, None, ETH, recipient=to(Chain.ETHEREUM)))
    assert (missing.status, missing.message) == (
        404,
        "No platform wallet for this api client; the operator provisions it",
    )
    platform = (await desk.platform())[Chain.ETHEREUM]
    quote = await fee(desk, None, ETH, recipient=to(Chain.ETHEREUM))
    assert quote.native_units == units(ETH, "0.00042")
    assert ("fee", platform, to(Chain.ETHEREUM), str(ETH), "None") in desk.gateway(ETH).calls


@pytest.mark.parametrize(
    ("recipient", "message"),
    [
        ("own", "recipient must differ from the wallet's own address"),
        (
            "0x52908400098527886E0F7030069857D2E4169EE7",
            "Invalid ETHEREUM address: expected fake-ethereum-<40 hex digits>",
        ),
    ],
)
async def test_fee_checks_the_recipient_like_the_send(
    desk: Desk, recipient: str, message: str
) -> None:
    user = await desk.user()
    if recipient == "own":
        recipient = desk.address(user, ETH)
    error = await refused(fee(desk, user, ETH, recipient=recipient))
    assert (error.status, error.message) == (400, message)


# -- /txid of a followed transfer ---------------------------------------------------------------
async def sent(desk: Desk) -> tuple[str, str]:
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "2")
    return user, (await desk.send(user, ETH, "0.5")).tx_hash


async def txid(desk: Desk, user: str, tx_hash: str) -> Any:
    found = await desk.reads.txid(desk.caller(), asset_id=ETH, tx_hash=tx_hash, user_id=user)
    return found.row


async def test_a_replaced_hash_answers_the_transfers_current_transaction(desk: Desk) -> None:
    user, first = await sent(desk)
    desk.clock.advance(60)
    await desk.follow()  # stuck: bumped
    bump = (await desk.signed()).tx_hash
    row = await txid(desk, user, first)
    assert (row.hash, row.status, row.type) == (bump, "pending", "send")
    desk.gateway(ETH).sightings[bump] = Sighting.SUCCESS
    await desk.follow()
    row = await txid(desk, user, first)
    assert (row.hash, row.status) == (bump, "success")


async def test_while_the_node_lacks_it_the_transfer_answers_its_own_row(desk: Desk) -> None:
    user, first = await sent(desk)
    eth = desk.gateway(ETH)
    eth.sightings[first] = Sighting.MISSING
    eth.refuse[first] = TransferRejected("Transfer rejected by the network: underpriced")
    eth.outcomes.append(TransferRejected("underpriced"))  # the bump's broadcast too
    await desk.follow()
    signed = await desk.signed()
    row = await txid(desk, user, first)
    assert (row.hash, row.status, row.type) == (signed.tx_hash, "pending", "send")
    assert (row.amount_units, row.fee_units) == (signed.amount_units, signed.fee_units)
    assert signed.amount_units == units(ETH, "0.5") - units(ETH, "0.00042")


async def test_a_cancelled_transfer_answers_failed_with_what_it_was_to_deliver(
    desk: Desk,
) -> None:
    user, first = await sent(desk)
    shown = await desk.transfers.replace(
        desk.client.client_id, "send-1", cancel=True, request_id_audit="op"
    )
    cancel = shown["current"]["txHash"]
    desk.gateway(ETH).sightings[cancel] = Sighting.SUCCESS
    await desk.follow()
    row = await txid(desk, user, first)
    assert (row.hash, row.status) == (cancel, "failed")
    assert row.amount_units == units(ETH, "0.5") - units(ETH, "0.00042")


async def test_another_users_hash_is_not_found(desk: Desk) -> None:
    _, first = await sent(desk)
    other = await desk.user()
    with pytest.raises(TransactionNotFound):
        await txid(desk, other, first)
