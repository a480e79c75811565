"""A third party's chain plugin replaces one chain's gateway with no edit to walletcore:
`tests/plugins/walletcore_testchain` (its own package, installed by `python3 dev.py test`)
registers `testchain` in the entry-point group `walletcore.chains`, and a deployment points
ETHEREUM at it with `WALLETCORE_CHAIN_ETHEREUM=testchain`. Over HTTP, ETHEREUM's `/balance`,
`/send` and `/txid` reach the plugin's recording gateway, with ETHEREUM's own address
validator and signature verifier (the `evm` plugin's); every other chain stays on the
sandbox ledger; the production profile refuses the plugin's sandbox-only gateway."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok
from pydantic import SecretStr

from walletcore import plugins
from walletcore.container import Container, check_profile, create_container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore_sandbox.chain import SandboxGateway

try:
    import walletcore_testchain
    from walletcore_testchain import RecordingGateway, RecordingSettings
except ImportError as missing:  # pragma: no cover - a set-up fault, not a skip
    raise ImportError(
        "the test plugin is not installed: `python3 dev.py test` installs it, or "
        "pip install -e tests/plugins/walletcore_testchain"
    ) from missing

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A deployer's variables: ETHEREUM on the plugin, the plugin's own setting."""
    monkeypatch.setenv("WALLETCORE_CHAIN_ETHEREUM", "testchain")
    monkeypatch.setenv("WALLETCORE_TESTCHAIN_BALANCE_UNITS", str(2 * 10**18))
    return Settings(home=tmp_path / "home", repo="memory")


def test_the_plugin_is_found_through_its_entry_point() -> None:
    found = plugins.chain_plugins()["testchain"]
    assert found is walletcore_testchain.PLUGIN
    assert not found.defines  # it replaces a gateway; ETHEREUM stays the evm plugin's
    assert plugins.chain_definitions().plugin_of(Chain.ETHEREUM).name == "evm"


def test_the_chain_map_uses_the_plugin_for_ethereum_only(container: Container) -> None:
    gateways = container.gateways()
    assert isinstance(gateways[Chain.ETHEREUM], RecordingGateway)
    others = [c for c in CONTRACT_CHAINS if c != Chain.ETHEREUM]
    assert all(isinstance(gateways[c], SandboxGateway) for c in others)
    plan = container.chain_plan()
    assert plan.choices[Chain.ETHEREUM].label == "testchain:fake"
    assert plan.choices[Chain.ETHEREUM].source == "WALLETCORE_CHAIN_ETHEREUM=testchain"
    read = plan.settings["testchain"]
    assert isinstance(read, RecordingSettings) and read.balance_units == 2 * 10**18


async def test_balance_send_and_txid_reach_the_plugins_gateway(
    api: Api, container: Container
) -> None:
    fake = container.gateways()[Chain.ETHEREUM]
    assert isinstance(fake, RecordingGateway)
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]

    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})) == "2"
    assert ("balance", address, "2") in fake.calls
    # BSC shares the address, and stays on the sandbox ledger
    assert created["addresses"]["BSC"] == address
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 3})) == "0"
    assert not any(call[-1] == "3" for call in fake.calls)

    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.5"}
    assert_error(await api.post("/send", {**body, "recipient": "0x12"}), 400)  # evm's validator
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="t1"))
    assert [s.tx_hash for s in fake.sent] == [sent["txHash"]]  # signed, verified, broadcast
    transfer = fake.sent[0].transfer
    assert (transfer.sender, transfer.recipient) == (address, RECIPIENT)
    assert sent["fee"] == "0.000021"  # the plugin's fee: 21,000 gwei

    row = assert_ok(
        await api.post("/txid", {"userId": user, "assetId": 2, "txHash": sent["txHash"]})
    )
    assert (row["hash"], row["type"], row["status"]) == (sent["txHash"], "send", "success")
    balance = Decimal(assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})))
    assert balance == 2 - Decimal(transfer.amount_units) / 10**18

    wrong = await api.post("/send", {**body, "password": "not it"}, X_Request_Id="t2")
    assert_error(wrong, 401)
    assert len(fake.sent) == 1 and [c[0] for c in fake.calls].count("broadcast") == 1


def test_production_refuses_the_plugins_sandbox_only_gateway(settings: Settings) -> None:
    production = settings.model_copy(
        update={
            "profile": Profile.PRODUCTION,
            "token_signing_key": SecretStr("11" * 32),
            "master_key": SecretStr("22" * 32),
        }
    )
    with pytest.raises(
        ConfigurationError, match=r"WALLETCORE_CHAIN_ETHEREUM=testchain is a sandbox adapter"
    ):
        check_profile(create_container(production))
