"""The `walletcore.chains` entry points of the real gateways: `rpc` (EVM nodes from
settings) and `devnet` (in-process engines), and what the profiles allow."""

from __future__ import annotations

from pathlib import Path

import pytest

from walletcore import plugins
from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain
from walletcore.sandbox.chain import SandboxGateway
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.signatures import verify_signature
from walletcore_chains.solana.gateway import SolanaGateway

RPC = {
    "rpc_ethereum": "http://127.0.0.1:1/eth",
    "rpc_bsc": "http://127.0.0.1:1/bsc",
    "rpc_polygon": "http://127.0.0.1:1/polygon",
    "rpc_solana": "http://127.0.0.1:1/solana",
}


def build(name: str, settings: Settings) -> dict[Chain, object]:
    return plugins.build(  # type: ignore[no-any-return]
        "walletcore.chains",
        name,
        settings=settings,
        clock=ManualClock(),
        address_validator=validate_address,
        signature_verifier=verify_signature,
    )


def test_rpc_builds_evm_gateways_per_network_from_settings(tmp_path: Path) -> None:
    gateways = build("rpc", Settings(home=tmp_path, network="testnet", **RPC))
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway) and eth.config.chain_id == 11155111
    assert isinstance(gateways[Chain.POLYGON], EvmGateway)
    assert all(isinstance(gateways[c], SandboxGateway) for c in (Chain.BITCOIN, Chain.TRON))
    assert isinstance(gateways[Chain.SOLANA], SolanaGateway)
    mainnet = build("rpc", Settings(home=tmp_path, **RPC))[Chain.BSC]
    assert isinstance(mainnet, EvmGateway) and mainnet.config.chain_id == 56


def test_rpc_needs_every_evm_url_and_an_rpc_network(tmp_path: Path) -> None:
    missing = {k: v for k, v in RPC.items() if k != "rpc_bsc"}
    with pytest.raises(ConfigurationError, match="WALLETCORE_RPC_BSC"):
        build("rpc", Settings(home=tmp_path, **missing))
    with pytest.raises(ConfigurationError, match="WALLETCORE_NETWORK=devnet"):
        build("rpc", Settings(home=tmp_path, network="devnet", **RPC))


def test_production_refuses_chains_without_a_real_gateway(tmp_path: Path) -> None:
    production = Settings(profile=Profile.PRODUCTION, home=tmp_path, **RPC)
    with pytest.raises(ConfigurationError, match="BITCOIN, TRON"):
        build("rpc", production)
    with pytest.raises(ConfigurationError, match="BITCOIN, TRON"):
        build("devnet", production)
