"""Sends below a chain's minimum on the sandbox chains: BITCOIN's dust limit of the recipient's
address type, SOLANA's rent-exempt minimum of a new account. Each is a 400 naming the
minimum, from `/send`, `/platform/send` and `/fee`, before anything is signed; the chains
without a minimum (EVM, TRON, tokens) take one base unit."""

from __future__ import annotations

from typing import Any

import pytest
from ops_support import ELSEWHERE, Ops

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest
from walletcore.testing import CONTRACT_CATALOG

BTC, SOL, ETH, TRX, USDC_SOL = 1, 6, 2, 4, 62
BTC_FEE = "0.0000141"  # 141 vB x 10 sat/vB: taken from a USER amount
SOL_FEE = "0.000005"  # one signature
P2PKH = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"
P2WPKH_DUST = (
    "the recipient must receive at least 0.00000294 BTC (the dust limit of its address type)"
)
NEW_ACCOUNT = "the rent-exempt minimum of a new SOLANA account"


async def refused(ops: Ops, call: Any) -> str:
    """The 400 a send or fee call answers; nothing was broadcast."""
    before = ops.broadcasts()
    with pytest.raises(InvalidRequest) as caught:
        await call
    assert caught.value.status == 400
    assert ops.broadcasts() == before
    return caught.value.message


async def funded_user(ops: Ops, client: ApiClient, asset_id: int, amount: str) -> str:
    user = await ops.user(client)
    await ops.fund(
        ops.wallets[user][CONTRACT_CATALOG.asset_by_id(asset_id).chain], asset_id, amount
    )
    return user


async def sponsored_client(ops: Ops, chain: Chain, native: int, amount: str) -> ApiClient:
    """A PLATFORM client whose platform wallet can pay the fees on `chain`."""
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    await ops.fund(await ops.platform_address(client, chain), native, amount)
    return client


def fee(ops: Ops, client: ApiClient, asset_id: int, amount: str, **where: Any) -> Any:
    recipient = where.pop("recipient", ELSEWHERE[CONTRACT_CATALOG.asset_by_id(asset_id).chain])
    return ops.reads.fee(
        ops.caller(client), asset_id=asset_id, recipient=recipient, amount=amount, **where
    )


async def test_a_btc_send_whose_recipient_gets_less_than_dust_is_refused(ops: Ops) -> None:
    """USER pays from the amount: the recipient gets the amount less the fee, which must
    reach the dust limit (294 sat to P2WPKH)."""
    client = await ops.client()
    user = await funded_user(ops, client, BTC, "0.01")
    message = await refused(ops, ops.send(client, user, BTC, "0.00001703"))
    assert message == (
        f"amount must be at least 0.00001704 BTC: {P2WPKH_DUST}, and the network fee of "
        f"{BTC_FEE} BTC is taken from the amount"
    )
    assert message == await refused(ops, fee(ops, client, BTC, "0.00001703", user_id=user))
    receipt = await ops.send(client, user, BTC, "0.00001704")
    assert receipt.tx_hash and ops.broadcasts() == 1


async def test_a_sponsored_btc_send_below_dust_is_refused_naming_it(ops: Ops) -> None:
    """PLATFORM pays the fee: the recipient gets the whole amount."""
    client = await sponsored_client(ops, Chain.BITCOIN, BTC, "0.01")
    user = await funded_user(ops, client, BTC, "0.01")
    below = (
        "amount is below the minimum send of 0.00000294 BTC to this recipient (the dust limit "
        "of its address type)"
    )
    assert await refused(ops, ops.send(client, user, BTC, "0.00000293")) == below
    assert await refused(ops, fee(ops, client, BTC, "0.00000293", user_id=user)) == below
    legacy = await refused(ops, ops.send(client, user, BTC, "0.00000545", recipient=P2PKH))
    assert "minimum send of 0.00000546 BTC" in legacy
    receipt = await ops.send(client, user, BTC, "0.00000294")
    assert receipt.fee_payer is FeePayer.PLATFORM and ops.broadcasts() == 1


async def test_a_platform_send_below_dust_is_refused(ops: Ops) -> None:
    client = await ops.client(platform=True)
    await ops.fund(await ops.platform_address(client, Chain.BITCOIN), BTC, "0.01")
    send = ops.sends.platform_send(
        ops.caller(client, "p-dust"),
        request_id="p-dust",
        asset_id=BTC,
        recipient=ELSEWHERE[Chain.BITCOIN],
        amount="0.00000293",
    )
    assert "minimum send of 0.00000294 BTC" in await refused(ops, send)
    platform_fee = fee(ops, client, BTC, "0.00000293", platform=True)
    assert "minimum send of 0.00000294 BTC" in await refused(ops, platform_fee)
    assert await ops.reads.fee(
        ops.caller(client), asset_id=BTC, recipient=ELSEWHERE[Chain.BITCOIN], platform=True
    )  # no amount: no minimum to check


async def test_a_sol_send_that_leaves_a_new_account_below_rent_is_refused(ops: Ops) -> None:
    client = await sponsored_client(ops, Chain.SOLANA, SOL, "1")
    user = await funded_user(ops, client, SOL, "1")
    message = await refused(ops, ops.send(client, user, SOL, "0.000890879"))
    assert message == (
        f"amount is below the minimum send of 0.00089088 SOL to this recipient ({NEW_ACCOUNT})"
    )
    await ops.send(client, user, SOL, "0.00089088")
    ops.clock.advance(60)  # confirmed: the account exists now
    await ops.send(client, user, SOL, "0.000000001")
    assert ops.broadcasts() == 2


async def test_a_user_sol_send_counts_the_fee_taken_from_it(ops: Ops) -> None:
    client = await ops.client()
    user = await funded_user(ops, client, SOL, "1")
    message = await refused(ops, ops.send(client, user, SOL, "0.000895879"))
    assert message == (
        "amount must be at least 0.00089588 SOL: the recipient must receive at least "
        f"0.00089088 SOL ({NEW_ACCOUNT}), and the network fee of {SOL_FEE} SOL is taken "
        "from the amount"
    )
    assert message == await refused(ops, fee(ops, client, SOL, "0.000895879", user_id=user))
    await ops.send(client, user, SOL, "0.00089588")


@pytest.mark.parametrize(
    ("chain", "native", "asset_id", "amount"),
    [
        (Chain.SOLANA, SOL, USDC_SOL, "0.000001"),  # a token: the fee payer pays the rent
        (Chain.ETHEREUM, ETH, ETH, "0.000000000000000001"),  # one wei
        (Chain.TRON, TRX, TRX, "0.000001"),  # one sun, to an address never activated
    ],
)
async def test_chains_without_a_minimum_take_one_base_unit(
    ops: Ops, chain: Chain, native: int, asset_id: int, amount: str
) -> None:
    client = await sponsored_client(ops, chain, native, "1000")
    user = await funded_user(ops, client, asset_id, "1")
    assert await fee(ops, client, asset_id, amount, user_id=user)
    receipt = await ops.send(client, user, asset_id, amount)
    assert receipt.fee_payer is FeePayer.PLATFORM and ops.broadcasts() == 1
