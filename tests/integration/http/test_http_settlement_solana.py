"""Trades that move SOL and USDC (SPL) over HTTP (docs/settlement.md), on
`WALLETCORE_CHAINS=devnet`: SOLANA is LiteSVM in process, with the SPL mints created at
start-up. A buy delivered from the desk (a token's to a wallet with no token account: the
desk pays its rent), a sell collected to it (a token's from a wallet holding no SOL, the
desk sponsoring its fee when the fee payer is `PLATFORM`), each `sent` then `settled`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, sign_in
from settlement_support import approved, balance, run_jobs, send_fee, trade_of, traded

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.solana.devnet import DevnetSolanaGateway

SOL, USDC = 6, 62


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"chains": "devnet", "jobs": "off"}


@pytest.fixture
def real_holdings() -> bool:
    return True


async def fund(container: Container, address: str, asset_id: int, amount: str) -> None:
    asset = CONTRACT_CATALOG.asset_by_id(asset_id)
    gateway = container.gateways()[Chain.SOLANA]
    assert isinstance(gateway, DevnetSolanaGateway)
    await gateway.fund(address, asset, int(Decimal(amount).scaleb(asset.decimals)))


async def desk(api: Api, container: Container, **amounts: str) -> str:
    address = (await container.wallets().provision_platform(api.client_id))[Chain.SOLANA]
    for symbol, amount in amounts.items():
        await fund(container, address, {"SOL": SOL, "USDC": USDC}[symbol], amount)
    return address


async def user(api: Api, container: Container, **amounts: str) -> str:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    for symbol, amount in amounts.items():
        asset_id = {"SOL": SOL, "USDC": USDC}[symbol]
        await fund(container, created["addresses"]["SOLANA"], asset_id, amount)
    return created["userId"]  # type: ignore[no-any-return]


async def settled(
    api: Api, container: Container, clock: ManualClock, user_id: str, trade: dict[str, Any]
) -> dict[str, str]:
    """The trade's transfer, `sent` at approval, `settled` once the jobs followed it."""
    sent = trade["settlement"]
    assert sent["status"] == "sent" and sent["txHash"], sent
    await run_jobs(container, clock)
    found: dict[str, str] = (await trade_of(api, user_id, trade["tradeId"]))["settlement"]
    assert found["status"] == "settled" and found["txHash"] == sent["txHash"], found
    return found


async def test_a_sol_buy_is_delivered_and_the_desk_pays_the_fee(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await desk(api, container, SOL="5")
    alice = await user(api, container)
    quote = await traded(api, "/order", alice, SOL, "0.5")
    trade = await approved(api, alice, quote["tradeId"])
    done = await settled(api, container, clock, alice, trade)
    assert await balance(api, SOL, alice) == Decimal("0.5")
    fee = await send_fee(api, SOL, done["txHash"])
    assert fee > 0 and Decimal(5) - await balance(api, SOL) == Decimal("0.5") + fee


async def test_a_usdc_buy_to_a_wallet_without_a_token_account_is_delivered(
    api: Api, container: Container, clock: ManualClock
) -> None:
    """The user holds nothing on SOLANA: the desk creates the token account and pays its
    rent and the fee, in SOL; the user receives the USDC exactly."""
    await desk(api, container, SOL="1", USDC="100")
    alice = await user(api, container)
    address = assert_ok(await api.post("/addresses", {"userId": alice}))["addresses"]["SOLANA"]
    body = {"assetId": USDC, "recipient": address}
    quoted = assert_ok(await api.post("/platform/fee", body))
    assert quoted == "0.00204428"  # the signature and the new token account's rent
    quote = await traded(api, "/order", alice, USDC, "12.5")
    trade = await approved(api, alice, quote["tradeId"])
    done = await settled(api, container, clock, alice, trade)
    assert await balance(api, USDC, alice) == Decimal("12.5")
    assert await balance(api, SOL, alice) == 0
    assert await balance(api, USDC) == Decimal("87.5")
    assert await send_fee(api, USDC, done["txHash"]) == Decimal("0.000005")  # the signature
    assert Decimal(1) - await balance(api, SOL) == Decimal(quoted)  # and the account's rent


async def test_a_sol_sell_approved_with_the_password_is_collected(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await desk(api, container, SOL="1")
    alice = await user(api, container, SOL="2")
    quote = await traded(api, "/sell", alice, SOL, "0.75")
    trade = await approved(api, alice, quote["tradeId"], password=PASSWORD)
    done = await settled(api, container, clock, alice, trade)
    assert await balance(api, SOL) == Decimal("1.75")
    fee = await send_fee(api, SOL, done["txHash"], alice)  # USER: on top of the amount
    assert await balance(api, SOL, alice) == Decimal("1.25") - fee


async def test_a_usdc_sell_from_a_wallet_without_sol_is_sponsored_by_the_desk(
    api: Api, container: Container, clock: ManualClock
) -> None:
    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    await desk(payer, container, SOL="1")  # no USDC yet: no token account of the desk
    alice = await user(payer, container, USDC="10")
    quote = await traded(payer, "/sell", alice, USDC, "4")
    trade = await approved(payer, alice, quote["tradeId"], password=PASSWORD)
    await settled(payer, container, clock, alice, trade)
    assert await balance(payer, USDC) == Decimal(4)
    assert await balance(payer, USDC, alice) == Decimal(6)
    assert await balance(payer, SOL, alice) == 0
    assert await balance(payer, SOL) < 1


async def test_a_sell_collected_later_refuses_a_wrong_password_and_changes_nothing(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await desk(api, container, SOL="1", USDC="1")  # its token account exists
    alice = await user(api, container, SOL="1", USDC="3")
    quote = await traded(api, "/sell", alice, USDC, "3")
    ids = {"userId": alice, "tradeId": quote["tradeId"]}
    waiting = (await approved(api, alice, quote["tradeId"]))["settlement"]
    assert (waiting["status"], waiting["amount"]) == ("awaiting_password", "3")

    wrong = await api.post("/trade/collect", {**ids, "password": "not it"})
    assert_error(wrong, 401, "Invalid password")
    assert (await trade_of(api, alice, quote["tradeId"]))["settlement"] == waiting
    assert await balance(api, USDC, alice) == Decimal(3)
    assert await balance(api, USDC) == Decimal(1)

    collected = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    await settled(api, container, clock, alice, collected)
    assert await balance(api, USDC) == Decimal(4)
    assert await balance(api, USDC, alice) == 0
    fee = await send_fee(api, USDC, collected["settlement"]["txHash"], alice)
    assert await balance(api, SOL, alice) == Decimal(1) - fee
