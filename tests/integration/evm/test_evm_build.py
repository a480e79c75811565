"""The chains as the container builds them from the chain plugins: `rpc` (EVM and Solana
nodes from the plugins' settings), `devnet` (in-process engines), one chain's own choice,
and what the profiles allow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from evm_support import NOWHERE, chain_gateways

from walletcore.container import check_profile, create_container
from walletcore.domain.assets import Chain
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import EvmSettings
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.tron.gateway import TronGateway
from walletcore_sandbox.chain import SandboxGateway

PRODUCTION = {
    "profile": Profile.PRODUCTION,
    "token_signing_key": "11" * 32,
    "master_key": "22" * 32,
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


def test_rpc_builds_evm_gateways_per_network_from_settings(tmp_path: Path) -> None:
    gateways = chain_gateways(tmp_path, EvmSettings(evm_network="testnet", **NOWHERE))
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway) and eth.config.chain_id == 11155111
    assert isinstance(gateways[Chain.POLYGON], EvmGateway)
    assert isinstance(gateways[Chain.TRON], TronGateway)
    assert isinstance(gateways[Chain.BITCOIN], BitcoinGateway)
    assert isinstance(gateways[Chain.SOLANA], SolanaGateway)
    mainnet = chain_gateways(tmp_path, EvmSettings(**NOWHERE))[Chain.BSC]
    assert isinstance(mainnet, EvmGateway) and mainnet.config.chain_id == 56


def test_rpc_needs_every_evm_url_and_an_rpc_network(tmp_path: Path) -> None:
    missing = {k: v for k, v in NOWHERE.items() if k != "bsc_rpc_url"}
    with pytest.raises(ConfigurationError) as caught:
        chain_gateways(tmp_path, EvmSettings(**missing))
    assert str(caught.value) == (
        "WALLETCORE_BSC_RPC_URL (or WALLETCORE_RPC_BSC) is required by BSC's rpc gateway"
    )
    with pytest.raises(ConfigurationError, match=r"WALLETCORE_NETWORK\)=devnet is not an RPC"):
        chain_gateways(tmp_path, EvmSettings(evm_network="devnet", **NOWHERE))


def test_the_deployers_variables_of_before_the_plugins_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WALLETCORE_CHAINS=rpc` with the variables a deployment already has: nothing breaks,
    and a missing one is named with the new name and the old."""
    monkeypatch.setenv("WALLETCORE_CHAINS", "rpc")
    monkeypatch.setenv("WALLETCORE_NETWORK", "testnet")
    # BITCOIN's rpc gateway needs WALLETCORE_BITCOIN_ESPLORA_URL, which a deployment of
    # the EVM chains and SOLANA alone does not have: it keeps BITCOIN on the ledger like this
    monkeypatch.setenv("WALLETCORE_CHAIN_BITCOIN", "sandbox")
    # and TRON's needs WALLETCORE_TRON_NODE_URL
    monkeypatch.setenv("WALLETCORE_CHAIN_TRON", "sandbox")
    for chain in ("ETHEREUM", "POLYGON", "SOLANA"):
        monkeypatch.setenv(f"WALLETCORE_RPC_{chain}", f"http://127.0.0.1:1/{chain.lower()}")
    with pytest.raises(ConfigurationError, match=r"WALLETCORE_BSC_RPC_URL \(or WALLETCORE_RPC_BSC"):
        check_profile(create_container(Settings(home=tmp_path)))
    monkeypatch.setenv("WALLETCORE_RPC_BSC", "http://127.0.0.1:1/bsc")
    container = create_container(Settings(home=tmp_path))
    check_profile(container)
    bsc = container.gateways()[Chain.BSC]
    assert isinstance(bsc, EvmGateway) and bsc.config.chain_id == 97
    assert isinstance(container.gateways()[Chain.SOLANA], SolanaGateway)


def test_one_chain_takes_another_plugin_or_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_CHAIN_SOLANA", "devnet")  # a bare mode
    monkeypatch.setenv("WALLETCORE_CHAIN_POLYGON", "sandbox")  # the ledger, chosen
    gateways = chain_gateways(tmp_path, EvmSettings(evm_network="testnet", **NOWHERE))
    assert isinstance(gateways[Chain.SOLANA], DevnetSolanaGateway)
    assert isinstance(gateways[Chain.POLYGON], SandboxGateway)
    assert isinstance(gateways[Chain.ETHEREUM], EvmGateway)
    monkeypatch.setenv("WALLETCORE_CHAIN_POLYGON", "evm:devnet")
    monkeypatch.setenv("WALLETCORE_CHAIN_SOLANA", "solana")  # its mode: WALLETCORE_CHAINS'
    gateways = chain_gateways(tmp_path, EvmSettings(**NOWHERE))
    assert isinstance(gateways[Chain.POLYGON], DevnetEvmGateway)
    assert isinstance(gateways[Chain.SOLANA], SolanaGateway)


def test_production_refuses_chains_without_a_real_gateway(tmp_path: Path) -> None:
    # every chain has an rpc gateway: production plans them all
    from walletcore_chains.bitcoin import BitcoinSettings
    from walletcore_chains.solana.plugin import SolanaSettings
    from walletcore_chains.tron import TronSettings

    container = create_container(
        Settings(home=tmp_path, chains="rpc", **PRODUCTION),
        chain_settings={
            "evm": EvmSettings(**NOWHERE),
            "solana": SolanaSettings(solana_rpc_url="http://127.0.0.1:1/solana"),
            "bitcoin": BitcoinSettings(bitcoin_esplora_url="http://127.0.0.1:1/esplora"),
            "tron": TronSettings(tron_node_url="http://127.0.0.1:1/tron"),
        },
    )
    plan = container.chain_plan()
    assert {c: choice.label for c, choice in plan.choices.items()} == {
        Chain.BITCOIN: "bitcoin:rpc",
        Chain.ETHEREUM: "evm:rpc",
        Chain.BSC: "evm:rpc",
        Chain.TRON: "tron:rpc",
        Chain.POLYGON: "evm:rpc",
        Chain.SOLANA: "solana:rpc",
    }
    with pytest.raises(ConfigurationError, match="BITCOIN, TRON") as caught:
        chain_gateways(tmp_path, EvmSettings(), chains="devnet", **PRODUCTION)
    assert "WALLETCORE_CHAINS=devnet is a sandbox adapter (evm:devnet: ETHEREUM, BSC, " in str(
        caught.value
    )
    with pytest.raises(ConfigurationError, match="WALLETCORE_CHAIN_BITCOIN=sandbox is a sandbox"):
        chain_gateways(
            tmp_path, EvmSettings(**NOWHERE), gateways={"BITCOIN": "sandbox"}, **PRODUCTION
        )
