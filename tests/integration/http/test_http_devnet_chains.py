"""End to end over HTTP on `WALLETCORE_CHAINS=devnet`: the EVM chains are in-process py-evm
chains (eth-tester) with the tokens deployed at start-up, SOLANA is LiteSVM with the SPL
mints created at start-up; BITCOIN and TRON stay on the sandbox ledger. Create a wallet, fund it, `/fee`, `/send`, poll `/txid` until `success`,
and `/balance` and `/transactions` agree with the chain."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, sign_in

from walletcore.container import Container, check_profile, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_sandbox.chain import SandboxGateway

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"chains": "devnet"}


async def fund(container: Container, address: str, asset_id: int, units: int) -> None:
    asset = CONTRACT_CATALOG.asset_by_id(asset_id)
    gateway = container.gateways()[asset.chain]
    assert isinstance(gateway, DevnetEvmGateway | DevnetSolanaGateway)
    await gateway.fund(address, asset, units)


SOL_RECIPIENT = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"


async def poll_success(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    for _ in range(20):  # the devnet mines each transaction at once: one poll suffices
        row = assert_ok(await api.post("/txid", body))
        if row["status"] != "pending":
            return row  # type: ignore[no-any-return]
    raise AssertionError("the transaction stayed pending")


async def test_eth_and_usdt_sends_end_to_end(api: Api, container: Container) -> None:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await fund(container, address, 2, 10**18)
    await fund(container, address, 21, 25_000_000)
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})) == "1"
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 21})) == "25"

    quoted = assert_ok(
        await api.post(
            "/fee", {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.5"}
        )
    )
    assert Decimal(quoted) > 0
    body = {
        "userId": user,
        "assetId": 2,
        "recipient": RECIPIENT,
        "amount": "0.5",
        "password": PASSWORD,
    }
    sent = assert_ok(await api.post("/send", body, X_Request_Id="eth-1"))
    assert (sent["status"], sent["feePayer"], sent["fee"]) == ("pending", "USER", quoted)
    assert assert_ok(await api.post("/send", body, X_Request_Id="eth-1")) == sent  # replayed
    row = await poll_success(api, {"userId": user, "assetId": 2, "txHash": sent["txHash"]})
    assert (row["type"], row["status"]) == ("send", "success") and row["date"]
    assert Decimal(row["amount"]) == Decimal("0.5") - Decimal(quoted)  # USER: fee from amount
    assert Decimal(row["fee"]) <= Decimal(quoted)
    balance = Decimal(assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})))
    assert balance == Decimal("0.5") + Decimal(quoted) - Decimal(row["fee"])
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 2}))
    assert (rows[0]["hash"], rows[0]["type"]) == (sent["txHash"], "send")
    assert rows[0] == row

    token = {"userId": user, "assetId": 21, "recipient": RECIPIENT, "amount": "7.5"}
    sent = assert_ok(
        await api.post("/send", {**token, "password": PASSWORD}, X_Request_Id="usdt-1")
    )
    row = await poll_success(api, {"userId": user, "assetId": 21, "txHash": sent["txHash"]})
    assert (row["type"], row["amount"], row["status"]) == ("send", "7.5", "success")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 21})) == "17.5"
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 21}))
    assert [(r["type"], r["amount"]) for r in rows] == [("send", "7.5"), ("receive", "25")]


async def test_wrong_password_and_insufficient_funds_leave_no_nonce_gap(
    api: Api, container: Container
) -> None:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await fund(container, address, 2, 10**17)
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.01"}
    assert_error(await api.post("/send", {**body, "password": "wrong one"}, X_Request_Id="w"), 401)
    assert_error(
        await api.post("/send", {**body, "amount": "5", "password": PASSWORD}, X_Request_Id="x"),
        400,
    )
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="w"))
    row = await poll_success(api, {"userId": user, "assetId": 2, "txHash": sent["txHash"]})
    assert row["status"] == "success"
    gateway = container.gateways()[Chain.ETHEREUM]
    assert isinstance(gateway, DevnetEvmGateway)
    assert (await gateway.w3.eth.get_transaction(sent["txHash"]))["nonce"] == 0


async def test_platform_fee_payer_tops_up_the_gas_of_a_token_send(
    api: Api, container: Container
) -> None:
    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    platform = await container.wallets().provision_platform(payer.client_id)
    await fund(container, platform[Chain.ETHEREUM], 2, 10**18)
    created = assert_ok(await payer.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await fund(container, address, 22, 3_000_000)  # USDC, and no ETH at all

    body = {"userId": user, "assetId": 22, "recipient": RECIPIENT, "amount": "3"}
    sent = assert_ok(await payer.post("/send", {**body, "password": PASSWORD}, X_Request_Id="t"))
    assert sent["feePayer"] == "PLATFORM"
    row = await poll_success(payer, {"userId": user, "assetId": 22, "txHash": sent["txHash"]})
    assert (row["type"], row["amount"], row["status"]) == ("send", "3", "success")
    assert assert_ok(await payer.post("/balance", {"userId": user, "assetId": 22})) == "0"
    platform_eth = Decimal(assert_ok(await payer.post("/platform/balance", {"assetId": 2})))
    assert Decimal(1) - platform_eth <= Decimal(sent["fee"])


def test_devnet_keeps_bitcoin_and_tron_on_the_ledger_and_production_refuses_it(
    container: Container, tmp_path: Any
) -> None:
    gateways = container.gateways()
    assert {c for c, g in gateways.items() if isinstance(g, DevnetEvmGateway)} == {
        Chain.ETHEREUM,
        Chain.BSC,
        Chain.POLYGON,
    }
    assert all(isinstance(gateways[c], SandboxGateway) for c in (Chain.BITCOIN, Chain.TRON))
    production = Settings(
        profile=Profile.PRODUCTION,
        home=tmp_path,
        chains="devnet",
        token_signing_key="11" * 32,
        master_key="22" * 32,
        repo="sql",
        prices="x",
        venue="y",
    )
    with pytest.raises(ConfigurationError, match="WALLETCORE_CHAINS=devnet"):
        check_profile(create_container(production))


async def test_sol_and_spl_sends_end_to_end(api: Api, container: Container) -> None:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["SOLANA"]
    await fund(container, address, 6, 2 * 10**9)
    await fund(container, address, 61, 10_000_000)
    fee = assert_ok(
        await api.post("/fee", {"userId": user, "assetId": 61, "recipient": SOL_RECIPIENT})
    )
    assert fee == "0.00204428"  # the signature and the recipient's new token account
    body = {"userId": user, "assetId": 61, "recipient": SOL_RECIPIENT, "amount": "2.5"}
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1"))
    assert (sent["fee"], sent["feePayer"]) == (fee, "USER")
    row = await poll_success(api, {"userId": user, "assetId": 61, "txHash": sent["txHash"]})
    assert (row["type"], row["amount"], row["status"]) == ("send", "2.5", "success")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 61})) == "7.5"
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 6})) == "1.99795572"
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 61}))
    assert [(r["type"], r["amount"]) for r in rows] == [("send", "2.5"), ("receive", "10")]
    assert rows[0] == row
    wrong = {**body, "password": "not it"}
    assert_error(await api.post("/send", wrong, X_Request_Id="s2"), 401, "Invalid password")


async def test_a_top_up_not_mined_in_time_is_a_504_and_the_retry_finishes_the_send(
    api: Api, container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    from web3.exceptions import TimeExhausted

    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    platform = await container.wallets().provision_platform(payer.client_id)
    await fund(container, platform[Chain.ETHEREUM], 2, 10**18)
    created = assert_ok(await payer.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await fund(container, address, 21, 4_000_000)  # USDT, and no ETH at all
    gateway = container.gateways()[Chain.ETHEREUM]
    assert isinstance(gateway, DevnetEvmGateway)
    mined = gateway.w3.eth.wait_for_transaction_receipt
    waits: list[str] = []

    async def slow_block(tx_hash: Any, *args: Any, **kwargs: Any) -> Any:
        waits.append(str(tx_hash))
        if len(waits) == 1:  # the first wait runs out: the top-up is not mined in time
            raise TimeExhausted(f"{tx_hash} not in the chain after 120 seconds")
        return await mined(tx_hash, *args, **kwargs)

    monkeypatch.setattr(gateway.w3.eth, "wait_for_transaction_receipt", slow_block)
    body = {"userId": user, "assetId": 21, "recipient": RECIPIENT, "amount": "4"}
    signed = {**body, "password": PASSWORD}
    answer = assert_error(await payer.post("/send", signed, X_Request_Id="slow"), 504)
    assert "same X-Request-Id" in answer["message"]
    assert await gateway.w3.eth.get_transaction_count(address) == 0  # the token did not move
    assert assert_ok(await payer.post("/balance", {"userId": user, "assetId": 21})) == "4"
    topped_up = Decimal(assert_ok(await payer.post("/balance", {"userId": user, "assetId": 2})))
    assert topped_up > 0  # the top-up went

    sent = assert_ok(await payer.post("/send", signed, X_Request_Id="slow"))  # the same bytes
    assert len(waits) == 2 and waits[0] == waits[1]  # the same top-up, waited for again
    row = await poll_success(payer, {"userId": user, "assetId": 21, "txHash": sent["txHash"]})
    assert (row["type"], row["amount"], row["status"]) == ("send", "4", "success")
    assert assert_ok(await payer.post("/balance", {"userId": user, "assetId": 21})) == "0"
    platform_rows = assert_ok(await payer.post("/platform/transactions", {"assetId": 2}))
    assert [r["type"] for r in platform_rows].count("send") == 1  # one top-up, not two
