"""A third party's EVM chain through `walletcore_chains.evm`'s public API: the plugin it
builds defines, describes and serves the chain from the caller's values (chain id, native
coin, tokens, fee cap, sandbox gas price), with settings of its own per chain, and no edit
of `evm/config.py`. (Played on ETHEREUM's name: the chain type is the contract's here.)"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from walletcore.chainplugins import GatewayContext
from walletcore.clock import ManualClock
from walletcore.domain.assets import Asset, AssetKind, Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.chains import FeeQuote, HashFormat, WrongPassword
from walletcore.nonces import LocalNonceLeases
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings
from walletcore_chains.evm import EvmChain, EvmConfig, SandboxEvm, evm_plugin, evm_settings_model
from walletcore_chains.evm.addresses import validate_address, verify_signature

L2 = Chain.ETHEREUM
NATIVE = Asset(8453, L2, "ETH", AssetKind.NATIVE, None, 18)
TOKEN = Asset(84531, L2, "USDC", AssetKind.TOKEN, "ERC20", 6)
CONTRACT = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
OTHER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SPEC = EvmChain(
    chain=L2,
    assets=(NATIVE, TOKEN),
    networks={
        "anvil": EvmConfig(L2, "anvil", 8453, "ETH", {}, confirmations=1),
        "mainnet": EvmConfig(L2, "mainnet", 8453, "ETH", {84531: CONTRACT}),
    },
    default_fee_cap=Decimal("0.001"),
    sandbox_gas_price_wei=10**8,
)
PLUGIN = evm_plugin("l2", [SPEC])
Model = PLUGIN.settings_model


def settings(**values: Any) -> Any:
    assert Model is not None
    return Model(**values)


def test_the_plugin_defines_and_describes_the_chain_from_the_callers_values() -> None:
    assert PLUGIN.name == "l2" and PLUGIN.chains == {L2} and PLUGIN.defines
    assert set(PLUGIN.gateways) == {"rpc"}  # the in-process devnet is the contract's chains'
    assert PLUGIN.keys[L2].path == "m/44'/60'/0'/0/0" and PLUGIN.keys[L2].curve == "secp256k1"
    assert PLUGIN.validate_address is validate_address
    assert PLUGIN.verify_signature is verify_signature
    described = PLUGIN.describes[L2]
    assert described is SPEC.description
    assert described.assets == (NATIVE, TOKEN) and described.native is NATIVE
    assert described.default_fee_cap == Decimal("0.001")
    assert (described.replaces_by, described.fee_wire) == ("fee-bump", "decimal")
    assert described.wrong_password is WrongPassword.INVALID_CREDENTIALS
    assert described.hashes == HashFormat("hex", "0x")
    assert described.sandbox == SandboxEvm(10**8)
    assert described.token_standards == {"ERC20"}


async def test_the_sandbox_ledger_charges_its_gas_price() -> None:
    rules = SPEC.description.sandbox
    assert rules is not None
    fee = await rules.fee(None, "0x", TOKEN, sponsored=False)  # type: ignore[arg-type]
    assert fee == FeeQuote(65_000 * 10**8)


def test_its_settings_are_per_chain_and_named_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings().network_of(L2) == "anvil"  # the first network by default
    monkeypatch.setenv("WALLETCORE_ETHEREUM_RPC_URL", "http://127.0.0.1:8545")
    monkeypatch.setenv("WALLETCORE_ETHEREUM_TOKENS", f'{{"84531": "{OTHER}"}}')
    monkeypatch.setenv("WALLETCORE_ETHEREUM_NETWORK", "mainnet")
    read = settings()
    assert read.rpc_url(L2).get_secret_value() == "http://127.0.0.1:8545"
    assert read.tokens_of(L2) == {84531: OTHER} and read.network_of(L2) == "mainnet"
    assert read.history_blocks_of(L2) == 2_000 and read.stuck_after_of(L2) is None
    assert read.variable_of(L2, "rpc_url") == "WALLETCORE_ETHEREUM_RPC_URL"


def test_what_the_rpc_gateway_needs_is_told_before_anything_is_built() -> None:
    needs = PLUGIN.gateways["rpc"].needs
    assert needs is not None
    told = list(needs(L2, settings(ethereum_network="testnet", ethereum_tokens={21: CONTRACT})))
    assert told == [
        "WALLETCORE_ETHEREUM_NETWORK=testnet is not an RPC network (anvil, mainnet)",
        "WALLETCORE_ETHEREUM_RPC_URL is required by ETHEREUM's rpc gateway",
        "WALLETCORE_ETHEREUM_TOKENS: asset 21 is not a token of ETHEREUM",
    ]
    lower = {84531: CONTRACT.lower()}
    (bad,) = needs(L2, settings(ethereum_rpc_url=SecretStr("http://x"), ethereum_tokens=lower))
    assert bad.endswith("(USDC on ETHEREUM) is not a checksummed (EIP-55) 0x address")
    assert CONTRACT.lower() not in bad


def test_the_rpc_gateway_is_configured_from_the_network_and_the_tokens(tmp_path: Path) -> None:
    from walletcore_chains.evm.gateway import EvmGateway

    leases = LocalNonceLeases()
    context: GatewayContext[Any] = GatewayContext(
        chain=L2,
        settings=settings(
            ethereum_rpc_url=SecretStr("http://127.0.0.1:1"),
            ethereum_network="mainnet",
            ethereum_tokens={84531: OTHER},
            ethereum_stuck_after_seconds=12.0,
        ),
        core=Settings(home=tmp_path),
        clock=ManualClock(),
        catalog=Catalog({L2: SPEC.assets}),
        validate_address=validate_address,
        verify_signature=verify_signature,
        keys=PLUGIN.keys[L2],
        nonce_leases=lambda: leases,
        description=SPEC.description,
    )
    gateway = PLUGIN.gateways["rpc"].build(context)
    assert isinstance(gateway, EvmGateway) and gateway.chain == L2
    assert gateway.config.chain_id == 8453 and gateway.config.network == "mainnet"
    assert dict(gateway.config.tokens) == {84531: OTHER}  # over the network's table
    assert gateway.config.stuck_after_seconds == 12.0 and not gateway.resigns


def test_a_chain_that_cannot_be_is_refused() -> None:
    with pytest.raises(ValueError, match="names no network"):
        EvmChain(L2, (NATIVE,), {}, Decimal(1), 1)
    with pytest.raises(ValueError, match="unknown tokens"):
        EvmChain(L2, (NATIVE,), {"x": EvmConfig(L2, "x", 1, "ETH", {9: OTHER})}, Decimal(1), 1)
    with pytest.raises(ValueError, match="configured for BSC"):
        EvmChain(L2, (NATIVE,), {"x": EvmConfig(Chain.BSC, "x", 1, "BNB")}, Decimal(1), 1)
    with pytest.raises(ValueError, match="names a chain twice"):
        evm_plugin("twice", [SPEC, SPEC])
    with pytest.raises(ConfigurationError):
        SPEC.config("mainnet", {21: CONTRACT}, {a.id: a for a in SPEC.assets})


def test_a_settings_model_for_several_chains() -> None:
    model = evm_settings_model([SPEC], name="L2Settings")
    assert model.__name__ == "L2Settings"
    assert {"ethereum_rpc_url", "ethereum_network", "ethereum_tokens"} <= set(model.model_fields)
