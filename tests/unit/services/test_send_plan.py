"""Who pays a send's network fee, what the recipient receives, and what the wallets must
hold (walletcore.services.send_plan, docs/wallet-operations.md "Who pays the network fee"
and "Minimums"), through `/send` and `/platform/send` on the core's fakes: what the gateway
was asked to build, what moved, and every refusal's exact message, before anything is
signed."""

from __future__ import annotations

from typing import Any

import pytest

from walletcore.domain.assets import CONTRACT_CHAINS, Chain, FeePayer
from walletcore.domain.errors import DomainError
from walletcore.domain.sends import SendState
from walletcore.ports import SendMinimum

from .conftest import BTC, ETH, SOL, USDT, Desk, DeskFactory, elsewhere, units

ETH_FEE = units(ETH, "0.00042")  # the fake's native ETHEREUM fee
TOKEN_FEE = units(ETH, "0.0013")  # and a token's, in ETH
DUST = SendMinimum(294, "the dust limit of its address type")


async def refused(call: Any) -> DomainError:
    with pytest.raises(DomainError) as caught:
        await call
    return caught.value


def nothing_signed(desk: Desk, asset_id: int) -> bool:
    gateway = desk.gateway(asset_id)
    return gateway.assembled == [] and gateway.broadcasts == []


# -- USER ------------------------------------------------------------------------------------
async def test_user_native_the_fee_comes_out_of_the_amount(desk: Desk) -> None:
    user = await desk.user()
    sender = desk.address(user, ETH)
    desk.fund(sender, ETH, "1")
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.send(user, ETH, "0.5", recipient=to)
    assert (receipt.fee, receipt.fee_payer) == ("0.00042", FeePayer.USER)
    (built,) = desk.gateway(ETH).prepared
    assert built.transfer.amount_units == units(ETH, "0.5") - ETH_FEE
    assert built.transfer.fee_payer == sender and built.transfer.signers == (sender,)
    assert desk.held(to, ETH) == units(ETH, "0.5") - ETH_FEE  # the recipient: amount - fee
    assert desk.held(sender, ETH) == units(ETH, "0.5")  # the wallet: exactly the amount


@pytest.mark.parametrize("amount", ["0.00042", "0.0004"])
async def test_user_native_the_amount_must_exceed_the_fee(desk: Desk, amount: str) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "1")
    error = await refused(desk.send(user, ETH, amount))
    assert (error.status, error.message) == (
        400,
        "amount must exceed the network fee of 0.00042 ETH, which is taken from it",
    )
    assert desk.gateway(ETH).prepared == []
    assert (await desk.record()).locked_until is None  # released


async def test_user_token_the_recipient_gets_it_all_and_the_wallet_pays_the_fee(
    desk: Desk,
) -> None:
    user = await desk.user()
    sender = desk.address(user, USDT)
    desk.fund(sender, USDT, "10")
    desk.fund(sender, ETH, "0.01")
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.send(user, USDT, "10", recipient=to)
    assert (receipt.fee, receipt.fee_payer) == ("0.0013", FeePayer.USER)
    assert desk.held(to, USDT) == units(USDT, "10")
    assert desk.held(sender, USDT) == 0
    assert desk.held(sender, ETH) == units(ETH, "0.01") - TOKEN_FEE


async def test_user_token_the_native_fee_must_be_held(desk: Desk) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, USDT), USDT, "10")
    error = await refused(desk.send(user, USDT, "10"))
    assert (error.status, error.message) == (
        400,
        (
            "Not enough ETH for the network fee: the send needs 0.0013 ETH in the wallet, "
            "which holds 0 ETH"
        ),
    )
    assert nothing_signed(desk, USDT)


@pytest.mark.parametrize(
    ("asset_id", "held", "amount", "message"),
    [
        (
            USDT,
            "3",
            "10",
            "Insufficient USDT balance: the wallet holds 3 USDT, the send needs 10 USDT",
        ),
        (
            ETH,
            "0.1",
            "0.5",
            "Insufficient ETH balance: the wallet holds 0.1 ETH, the send needs 0.5 ETH",
        ),
    ],
)
async def test_a_balance_too_small_for_the_amount_is_400_naming_both(
    desk: Desk, asset_id: int, held: str, amount: str, message: str
) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, asset_id), asset_id, held)
    error = await refused(desk.send(user, asset_id, amount))
    assert (error.status, error.message) == (400, message)
    assert nothing_signed(desk, asset_id)


async def test_an_address_unknown_to_the_indexer_holds_nothing(make_desk: DeskFactory) -> None:
    """A Bitcoin indexer's `AddressUnknown` (a 404 on `/balance`) is a balance of 0 for a
    send: an insufficient balance, not a 404."""
    from walletcore.testing.chains import FollowedFakeGateway

    gateways: dict[Chain, Any] = {chain: FollowedFakeGateway(chain) for chain in CONTRACT_CHAINS}
    gateways[Chain.BITCOIN] = FollowedFakeGateway(Chain.BITCOIN, known_only=True)
    desk = await make_desk(gateways=gateways)
    user = await desk.user()
    error = await refused(desk.send(user, BTC, "0.001"))
    assert (error.status, error.message) == (
        400,
        "Insufficient BTC balance: the wallet holds 0 BTC, the send needs 0.001 BTC",
    )


async def test_a_send_to_the_wallets_own_address_is_refused(desk: Desk) -> None:
    user = await desk.user()
    own = desk.address(user, ETH)
    desk.fund(own, ETH, "1")
    error = await refused(desk.send(user, ETH, "0.1", recipient=own))
    assert (error.status, error.message) == (
        400,
        "recipient must differ from the wallet's own address",
    )
    platform = await desk.platform()
    desk.fund(platform[Chain.ETHEREUM], ETH, "1")
    error = await refused(desk.platform_send(ETH, "0.1", recipient=platform[Chain.ETHEREUM]))
    assert (error.status, error.message) == (
        400,
        "recipient must differ from the platform wallet's own address",
    )
    assert nothing_signed(desk, ETH)


async def test_a_wallet_without_the_chains_address_is_told_to_extend(desk: Desk) -> None:
    await desk.set_client(enabled_assets=(BTC,))
    user = await desk.user()  # a wallet of BITCOIN only
    await desk.set_client(enabled_assets=(BTC, ETH))
    error = await refused(desk.send(user, ETH, "0.1"))
    assert (error.status, error.message) == (
        400,
        "The wallet has no ETHEREUM address yet; add it with /extend and the password",
    )


# -- PLATFORM --------------------------------------------------------------------------------
async def test_platform_pays_the_fee_of_a_token_send_and_co_signs(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, ETH, "1")
    user = await desk.user()
    sender = desk.address(user, USDT)
    desk.fund(sender, USDT, "10")  # and no ETH at all
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.send(user, USDT, "10", recipient=to)
    assert (receipt.fee, receipt.fee_payer) == ("0.0013", FeePayer.PLATFORM)
    eth = desk.gateway(USDT)
    (built,) = eth.prepared
    assert (built.transfer.fee_payer, built.transfer.signers) == (platform, (platform, sender))
    assert ("fee", sender, to, str(USDT), platform) in eth.calls  # quoted for the sponsor
    assert desk.held(to, USDT) == units(USDT, "10")
    assert desk.held(platform, ETH) == units(ETH, "1") - TOKEN_FEE
    assert desk.held(sender, ETH) == 0


async def test_platform_pays_the_fee_of_a_native_send_in_full(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, ETH, "1")
    user = await desk.user()
    sender = desk.address(user, ETH)
    desk.fund(sender, ETH, "0.5")
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.send(user, ETH, "0.5", recipient=to)
    assert receipt.fee_payer is FeePayer.PLATFORM
    assert desk.held(to, ETH) == units(ETH, "0.5")  # the whole amount
    assert desk.held(sender, ETH) == 0  # debited exactly the amount
    assert desk.held(platform, ETH) == units(ETH, "1") - ETH_FEE


async def test_a_per_asset_fee_payer_overrides_the_clients(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.USER, asset_fee_payers={USDT: FeePayer.PLATFORM})
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, ETH, "1")
    user = await desk.user()
    desk.fund(desk.address(user, USDT), USDT, "10")
    desk.fund(desk.address(user, ETH), ETH, "1")
    token = await desk.send(user, USDT, "1", request_id="t-1")
    native = await desk.send(user, ETH, "0.1", request_id="n-1")
    assert (token.fee_payer, native.fee_payer) == (FeePayer.PLATFORM, FeePayer.USER)


async def test_platform_falls_back_to_user_without_a_platform_wallet(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    user = await desk.user()
    sender = desk.address(user, ETH)
    desk.fund(sender, ETH, "1")
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.send(user, ETH, "0.5", recipient=to)
    assert (receipt.fee_payer, receipt.fee) == (FeePayer.USER, "0.00042")
    assert desk.held(to, ETH) == units(ETH, "0.5") - ETH_FEE  # the USER rule: from the amount
    assert desk.gateway(ETH).prepared[0].transfer.signers == (sender,)


async def test_platform_falls_back_to_user_when_the_platform_wallet_is_short(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, ETH, "0.001")  # less than a token transfer's 0.0013
    user = await desk.user()
    sender = desk.address(user, USDT)
    desk.fund(sender, USDT, "10")
    desk.fund(sender, ETH, "0.01")
    receipt = await desk.send(user, USDT, "10")
    assert receipt.fee_payer is FeePayer.USER
    assert desk.held(platform, ETH) == units(ETH, "0.001")
    assert desk.held(sender, ETH) == units(ETH, "0.01") - TOKEN_FEE


async def test_a_fallback_token_send_still_needs_native_coin(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    user = await desk.user()
    desk.fund(desk.address(user, USDT), USDT, "10")
    error = await refused(desk.send(user, USDT, "10"))
    assert (error.status, error.message) == (
        400,
        (
            "Not enough ETH for the network fee: the send needs 0.0013 ETH in the wallet, "
            "which holds 0 ETH"
        ),
    )


async def test_a_sponsored_solana_send_costs_a_second_signature(desk: Desk) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.SOLANA]
    desk.fund(platform, SOL, "1")
    user = await desk.user()
    desk.fund(desk.address(user, SOL), SOL, "1")
    receipt = await desk.send(user, SOL, "0.5")
    assert (receipt.fee_payer, receipt.fee) == (FeePayer.PLATFORM, "0.00001")


# -- /platform/send ---------------------------------------------------------------------------
async def test_the_platform_wallet_pays_its_own_fee_on_top(desk: Desk) -> None:
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, ETH, "1")
    to = elsewhere(Chain.ETHEREUM)
    receipt = await desk.platform_send(ETH, "0.5", recipient=to)
    assert (receipt.fee, receipt.fee_payer) == ("0.00042", FeePayer.PLATFORM)
    assert desk.held(to, ETH) == units(ETH, "0.5")
    assert desk.held(platform, ETH) == units(ETH, "0.5") - ETH_FEE


@pytest.mark.parametrize(
    ("funds", "asset_id", "amount", "message"),
    [
        (
            {ETH: "0.5"},
            ETH,
            "0.5",
            (
                "Insufficient ETH balance: the platform wallet holds 0.5 ETH, the send needs "
                "0.50042 ETH (0.5 ETH and a network fee of 0.00042 ETH)"
            ),
        ),
        (
            {USDT: "3", ETH: "1"},
            USDT,
            "10",
            "Insufficient USDT balance: the platform wallet holds 3 USDT, the send needs 10 USDT",
        ),
        (
            {USDT: "10"},
            USDT,
            "10",
            (
                "Not enough ETH for the network fee: the send needs 0.0013 ETH in the platform "
                "wallet, which holds 0 ETH"
            ),
        ),
    ],
)
async def test_a_platform_send_it_cannot_pay_is_400(
    desk: Desk, funds: dict[int, str], asset_id: int, amount: str, message: str
) -> None:
    platform = (await desk.platform())[Chain.ETHEREUM]
    for funded_asset, held in funds.items():
        desk.fund(platform, funded_asset, held)
    error = await refused(desk.platform_send(asset_id, amount))
    assert (error.status, error.message) == (400, message)
    assert nothing_signed(desk, asset_id)
    assert (await desk.record("psend-1")).state is SendState.STARTED


async def test_a_platform_send_before_the_platform_wallet_exists_is_404(desk: Desk) -> None:
    error = await refused(desk.platform_send(ETH, "0.1"))
    assert (error.status, error.message) == (
        404,
        "No platform wallet for this api client; the operator provisions it",
    )


# -- minimums ---------------------------------------------------------------------------------
async def test_a_send_below_the_chains_minimum_is_refused_before_anything_is_signed(
    desk: Desk,
) -> None:
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = (await desk.platform())[Chain.BITCOIN]
    desk.fund(platform, BTC, "1")
    desk.gateway(BTC).minimums[BTC] = DUST
    user = await desk.user()
    desk.fund(desk.address(user, BTC), BTC, "1")
    message = (
        "amount is below the minimum send of 0.00000294 BTC to this recipient "
        "(the dust limit of its address type)"
    )
    for call in (desk.send(user, BTC, "0.00000293"), desk.platform_send(BTC, "0.00000293")):
        error = await refused(call)
        assert (error.status, error.message) == (400, message)
    assert desk.gateway(BTC).prepared == []
    sent = await desk.platform_send(BTC, "0.00000294", request_id="at-the-minimum")
    assert desk.held(elsewhere(Chain.BITCOIN), BTC) == 294
    assert sent.fee_payer is FeePayer.PLATFORM


async def test_a_user_native_minimum_counts_the_fee_taken_from_the_amount(desk: Desk) -> None:
    desk.gateway(BTC).minimums[BTC] = DUST
    user = await desk.user()
    desk.fund(desk.address(user, BTC), BTC, "1")
    error = await refused(desk.send(user, BTC, "0.00001"))  # 1000 sat - 1410 sat fee
    assert (error.status, error.message) == (
        400,
        (
            "amount must be at least 0.00001704 BTC: the recipient must receive at least "
            "0.00000294 BTC (the dust limit of its address type), and the network fee of "
            "0.0000141 BTC is taken from the amount"
        ),
    )
    assert nothing_signed(desk, BTC)
    # the refusal released the id: once the chain's minimum no longer applies (a Solana
    # recipient funded meanwhile, say), the same request goes through under it
    del desk.gateway(BTC).minimums[BTC]
    desk.gateway(BTC).native_fee = 500
    receipt = await desk.send(user, BTC, "0.00001")
    assert desk.gateway(BTC).broadcasts == [receipt.tx_hash]
    assert desk.held(elsewhere(Chain.BITCOIN), BTC) == 500


async def test_a_chain_without_a_minimum_takes_one_base_unit(desk: Desk) -> None:
    platform = (await desk.platform())[Chain.ETHEREUM]
    desk.fund(platform, USDT, "1")
    desk.fund(platform, ETH, "1")
    await desk.platform_send(USDT, "0.000001")
    assert desk.held(elsewhere(Chain.ETHEREUM), USDT) == 1
