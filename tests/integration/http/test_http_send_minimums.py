"""Sends below a chain's minimum over HTTP on the real engines: BITCOIN on `bitcoind -regtest`
(`WALLETCORE_CHAINS=rpc`, Core backend; skipped, saying why, without one), SOLANA on LiteSVM
(`WALLETCORE_CHAINS=devnet`). `/send` and `/fee` answer a 400 naming the minimum before
anything is signed, and nothing reaches the mempool or the chain."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, regtest_bitcoind, rpc_env
from solders.keypair import Keypair

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.testing.bitcoind import Bitcoind

DUST = "the dust limit of its address type"
NEW_ACCOUNT = "the rent-exempt minimum of a new SOLANA account"


def at_least(message: str, received: str, rule: str, symbol: str) -> str:
    """The amount a USER native send's refusal asks for: the minimum and the fee taken."""
    found = re.fullmatch(
        rf"amount must be at least ([0-9.]+) {symbol}: the recipient must receive at least "
        rf"{re.escape(received)} {symbol} \({re.escape(rule)}\), and the network fee of "
        rf"[0-9.]+ {symbol} is taken from the amount",
        message,
    )
    assert found is not None, message
    return found.group(1)


node = pytest.fixture(scope="module", name="node")(regtest_bitcoind)


class TestBitcoinRegtest:
    @pytest.fixture
    def settings(self, tmp_path: Path, node: Bitcoind, monkeypatch: pytest.MonkeyPatch) -> Settings:
        home = tmp_path / "home"
        home.mkdir()
        env = {
            **rpc_env(home, Chain.BITCOIN),
            "WALLETCORE_BITCOIN_NETWORK": "regtest",
            "WALLETCORE_BITCOIN_BACKEND": "core",
            "WALLETCORE_BITCOIN_RPC_URL": node.url,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        return Settings()

    @pytest.fixture
    def container(
        self, settings: Settings, clock: ManualClock, keystore: SealedKeyStore
    ) -> Container:
        return create_container(settings, clock=clock, keystore=keystore)

    async def test_a_send_below_dust_is_a_400_naming_it_and_nothing_reaches_the_mempool(
        self, api: Api, node: Bitcoind
    ) -> None:
        created = assert_ok(await api.post("/create", {"password": PASSWORD}))
        user, sender = created["userId"], created["addresses"]["BITCOIN"]
        node.fund(sender, "0.01")
        node.mine(1)
        assert node.call("getrawmempool") == []
        segwit = node.call("getnewaddress", "", "bech32", wallet="miner")
        legacy = node.call("getnewaddress", "", "legacy", wallet="miner")
        body: dict[str, Any] = {"userId": user, "assetId": 1, "recipient": segwit}

        refusal = assert_error(
            await api.post(
                "/send",
                {**body, "amount": "0.000004", "password": PASSWORD},
                X_Request_Id="dust-1",
            ),
            400,
        )["message"]
        least = at_least(refusal, "0.00000294", DUST, "BTC")
        fee = assert_error(await api.post("/fee", {**body, "amount": "0.000004"}), 400)
        assert fee["message"] == refusal
        to_legacy = {**body, "recipient": legacy, "amount": "0.000006", "password": PASSWORD}
        refusal = assert_error(await api.post("/send", to_legacy, X_Request_Id="dust-2"), 400)
        at_least(refusal["message"], "0.00000546", DUST, "BTC")
        assert node.call("getrawmempool") == []  # nothing was sent

        sent = assert_ok(
            await api.post(
                "/send", {**body, "amount": least, "password": PASSWORD}, X_Request_Id="dust-3"
            )
        )
        assert node.call("getrawmempool") == [sent["txHash"]]
        outputs = node.call("getrawtransaction", sent["txHash"], 1)["vout"]
        paid = [o for o in outputs if o["scriptPubKey"].get("address") == segwit]
        assert [round(o["value"] * 10**8) for o in paid] == [294]  # the dust limit itself


class TestSolanaLiteSvm:
    @pytest.fixture
    def settings_overrides(self) -> dict[str, Any]:
        return {"chains": "devnet"}

    async def test_a_sol_send_below_a_new_accounts_rent_is_a_400_and_nothing_lands(
        self, api: Api, container: Container
    ) -> None:
        created = assert_ok(await api.post("/create", {"password": PASSWORD}))
        user, sender = created["userId"], created["addresses"]["SOLANA"]
        gateway = container.gateways()[Chain.SOLANA]
        assert isinstance(gateway, DevnetSolanaGateway)
        await gateway.fund(sender, CONTRACT_CATALOG.asset_by_id(6), 10**9)
        fresh = str(Keypair().pubkey())
        body: dict[str, Any] = {"userId": user, "assetId": 6, "recipient": fresh}

        refusal = assert_error(
            await api.post(
                "/send", {**body, "amount": "0.000891", "password": PASSWORD}, X_Request_Id="rent-1"
            ),
            400,
        )["message"]
        least = at_least(refusal, "0.00089088", NEW_ACCOUNT, "SOL")
        fee = assert_error(await api.post("/fee", {**body, "amount": "0.000891"}), 400)
        assert fee["message"] == refusal
        history = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 6}))
        assert [row["type"] for row in history] == ["receive"]  # the faucet's, nothing sent
        assert await gateway.balance(fresh, CONTRACT_CATALOG.asset_by_id(6)) == 0

        sent = assert_ok(
            await api.post(
                "/send", {**body, "amount": least, "password": PASSWORD}, X_Request_Id="rent-2"
            )
        )
        assert sent["status"] == "pending"
        assert await gateway.balance(fresh, CONTRACT_CATALOG.asset_by_id(6)) == 890_880
