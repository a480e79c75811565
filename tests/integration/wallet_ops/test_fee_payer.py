"""Who pays the network fee of a send: USER from the amount or in native coin, PLATFORM from
the platform wallet, falling back to USER when it cannot."""

from __future__ import annotations

import pytest
from ops_support import ELSEWHERE, Ops

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import InsufficientFunds, InvalidRequest
from walletcore.ports import ChainGateway

ETH_FEE = "0.00042"  # 21,000 gas x 20 gwei
USDT_FEE = "0.0013"  # 65,000 gas x 20 gwei


async def received(ops: Ops, chain: Chain, asset_id: int) -> str:
    gateway: ChainGateway = ops.gateways[chain]  # type: ignore[assignment]
    from walletcore.domain.money import format_balance
    from walletcore.testing import CONTRACT_CATALOG

    ops.clock.advance(60)  # past the confirmation delay
    asset = CONTRACT_CATALOG.asset_by_id(asset_id)
    return format_balance(await gateway.balance(ELSEWHERE[chain], asset), asset.decimals)


async def test_user_native_send_takes_the_fee_from_the_amount(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    receipt = await ops.send(client, user, 2, "0.5")
    assert (receipt.fee, receipt.fee_payer) == (ETH_FEE, FeePayer.USER)
    assert await ops.balance(client, user, 2) == "0.5"
    assert await received(ops, Chain.ETHEREUM, 2) == "0.49958"


async def test_user_native_amount_must_exceed_the_fee(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    with pytest.raises(InvalidRequest) as caught:
        await ops.send(client, user, 2, ETH_FEE)
    assert caught.value.status == 400
    assert caught.value.message == (
        f"amount must exceed the network fee of {ETH_FEE} ETH, which is taken from it"
    )
    assert ops.broadcasts() == 0


async def test_user_token_send_needs_native_coin_for_the_fee(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 21, "100")
    with pytest.raises(InsufficientFunds) as caught:
        await ops.send(client, user, 21, "10")
    assert caught.value.status == 400
    assert caught.value.message == (
        f"Not enough ETH for the network fee: the send needs {USDT_FEE} ETH in the wallet, "
        "which holds 0 ETH"
    )
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "0.01")
    receipt = await ops.send(client, user, 21, "10")
    assert (receipt.fee, receipt.fee_payer) == (USDT_FEE, FeePayer.USER)
    assert await ops.balance(client, user, 21) == "90"
    assert await ops.balance(client, user, 2) == "0.0087"
    assert await received(ops, Chain.ETHEREUM, 21) == "10"


async def test_platform_covers_the_fee_of_a_token_send(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    platform = await ops.platform_address(client, Chain.ETHEREUM)
    await ops.fund(platform, 2, "1")
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 21, "100")  # no ETH at all
    receipt = await ops.send(client, user, 21, "10")
    assert (receipt.fee, receipt.fee_payer) == (USDT_FEE, FeePayer.PLATFORM)
    assert await ops.balance(client, None, 2) == "0.9987"
    assert await ops.balance(client, user, 21) == "90"
    assert await received(ops, Chain.ETHEREUM, 21) == "10"


async def test_platform_covers_the_fee_of_a_native_send_in_full(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    platform = await ops.platform_address(client, Chain.SOLANA)
    await ops.fund(platform, 6, "1")
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.SOLANA], 6, "1")
    receipt = await ops.send(client, user, 6, "0.4")
    # Two signatures (the platform's as fee payer, the user's): 2 x 5,000 lamports.
    assert (receipt.fee, receipt.fee_payer) == ("0.00001", FeePayer.PLATFORM)
    assert await ops.balance(client, user, 6) == "0.6"
    assert await ops.balance(client, None, 6) == "0.99999"
    assert await received(ops, Chain.SOLANA, 6) == "0.4"


async def test_platform_falls_back_to_user_without_a_platform_wallet(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM)
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    receipt = await ops.send(client, user, 2, "0.5")
    assert (receipt.fee, receipt.fee_payer) == (ETH_FEE, FeePayer.USER)
    assert await received(ops, Chain.ETHEREUM, 2) == "0.49958"


async def test_platform_falls_back_to_user_when_the_platform_wallet_is_short(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    platform = await ops.platform_address(client, Chain.BITCOIN)
    await ops.fund(platform, 1, "0.00001")  # less than a sponsored fee (2,400 sat)
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.BITCOIN], 1, "1")
    receipt = await ops.send(client, user, 1, "0.5")
    assert (receipt.fee, receipt.fee_payer) == ("0.0000141", FeePayer.USER)
    assert await ops.balance(client, None, 1) == "0.00001"


async def test_a_fallback_token_send_still_needs_native_coin(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.TRON], 41, "100")
    with pytest.raises(InsufficientFunds, match=r"Not enough TRX for the network fee"):
        await ops.send(client, user, 41, "10")
    platform = await ops.platform_address(client, Chain.TRON)
    await ops.fund(platform, 4, "100")
    receipt = await ops.send(client, user, 41, "10")
    # 345 bandwidth x 1,000 sun + 130,000 energy x 210 sun (a first-time holder)
    assert (receipt.fee, receipt.fee_payer) == ("27.645", FeePayer.PLATFORM)


async def test_the_platform_wallet_sends_and_pays_its_own_fee_on_top(ops: Ops) -> None:
    client = await ops.client(platform=True)
    platform = await ops.platform_address(client, Chain.ETHEREUM)
    await ops.fund(platform, 2, "1")
    receipt = await ops.sends.platform_send(
        ops.caller(client, "p-1"),
        request_id="p-1",
        asset_id=2,
        recipient=ELSEWHERE[Chain.ETHEREUM],
        amount="0.5",
    )
    assert (receipt.fee, receipt.fee_payer) == (ETH_FEE, FeePayer.PLATFORM)
    assert await ops.balance(client, None, 2) == "0.49958"
    assert await received(ops, Chain.ETHEREUM, 2) == "0.5"
    with pytest.raises(InsufficientFunds, match=r"the send needs 0.50042 ETH"):
        await ops.sends.platform_send(
            ops.caller(client, "p-2"),
            request_id="p-2",
            asset_id=2,
            recipient=ELSEWHERE[Chain.ETHEREUM],
            amount="0.5",
        )
