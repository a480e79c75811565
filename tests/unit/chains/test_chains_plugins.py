"""The chain plugins walletcore installs (`walletcore.chains` entry points): one definition
per chain, and each plugin's own settings, read from `WALLETCORE_<CHAIN>_...` variables
and from the names deployers used before the plugins."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from walletcore import plugins
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore_chains.bitcoin import BitcoinSettings
from walletcore_chains.evm.plugin import EvmSettings
from walletcore_chains.solana.plugin import SolanaSettings
from walletcore_chains.tron import TronSettings
from walletcore_sandbox.chain import SandboxChainSettings

USDT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


def test_every_chain_is_defined_once_by_its_own_plugin() -> None:
    installed = plugins.chain_plugins()
    assert {"sandbox", "evm", "solana", "bitcoin", "tron"} <= set(installed)
    defined = plugins.chain_definitions()
    assert {c: defined.plugin_of(c).name for c in CONTRACT_CHAINS} == {
        Chain.BITCOIN: "bitcoin",
        Chain.ETHEREUM: "evm",
        Chain.BSC: "evm",
        Chain.TRON: "tron",
        Chain.POLYGON: "evm",
        Chain.SOLANA: "solana",
    }
    assert {c: defined.derivation(c).curve for c in CONTRACT_CHAINS} == {
        **dict.fromkeys(CONTRACT_CHAINS, "secp256k1"),
        Chain.SOLANA: "ed25519",
    }
    modes = {name: (set(p.gateways), p.settings_model) for name, p in installed.items()}
    assert modes["evm"] == ({"rpc", "devnet"}, EvmSettings)
    assert modes["solana"] == ({"rpc", "devnet"}, SolanaSettings)
    assert modes["bitcoin"] == ({"rpc"}, BitcoinSettings)
    assert modes["tron"] == ({"rpc"}, TronSettings)
    assert modes["sandbox"] == ({"sandbox"}, SandboxChainSettings)
    sandbox_only = {
        f"{name}:{mode}"
        for name, plugin in installed.items()
        for mode, factory in plugin.gateways.items()
        if factory.sandbox_only
    }
    assert {"evm:devnet", "solana:devnet", "sandbox:sandbox"} <= sandbox_only
    assert "evm:rpc" not in sandbox_only and "solana:rpc" not in sandbox_only


def test_evm_settings_read_the_new_names_and_the_older_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = EvmSettings()
    assert (defaults.ethereum_rpc_url, defaults.evm_network, defaults.evm_tokens) == (
        None,
        "mainnet",
        {},
    )
    assert (
        defaults.evm_rpc_timeout_seconds,
        defaults.evm_receipt_timeout_seconds,
        defaults.evm_history_blocks,
    ) == (20.0, 120.0, 2_000)
    monkeypatch.setenv("WALLETCORE_RPC_ETHEREUM", "http://older/eth")
    monkeypatch.setenv("WALLETCORE_RPC_BSC", "http://older/bsc")
    monkeypatch.setenv("WALLETCORE_BSC_RPC_URL", "http://newer/bsc")  # the new name wins
    monkeypatch.setenv("WALLETCORE_POLYGON_RPC_URL", "http://newer/polygon")
    monkeypatch.setenv("WALLETCORE_NETWORK", "testnet")
    monkeypatch.setenv("WALLETCORE_RPC_TIMEOUT_SECONDS", "7")
    monkeypatch.setenv("WALLETCORE_EVM_TOKENS", f'{{"21": "{USDT}", "31": " {USDT} "}}')
    monkeypatch.setenv("WALLETCORE_EVM_RECEIPT_TIMEOUT_SECONDS", "45")
    monkeypatch.setenv("WALLETCORE_EVM_HISTORY_BLOCKS", "10000")
    read = EvmSettings()
    urls = {c: read.rpc_url(c) for c in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)}
    assert {c: u.get_secret_value() for c, u in urls.items() if u is not None} == {
        Chain.ETHEREUM: "http://older/eth",
        Chain.BSC: "http://newer/bsc",
        Chain.POLYGON: "http://newer/polygon",
    }
    assert "http" not in repr(read)  # the URLs are secrets: they often carry an API key
    assert (read.evm_network, read.evm_rpc_timeout_seconds) == ("testnet", 7.0)
    assert read.evm_tokens == {21: USDT, 31: USDT}
    assert (read.evm_receipt_timeout_seconds, read.evm_history_blocks) == (45.0, 10_000)
    monkeypatch.setenv("WALLETCORE_EVM_NETWORK", "mainnet")
    assert EvmSettings().evm_network == "mainnet"
    assert EvmSettings(evm_network="testnet").evm_network == "testnet"  # by field name


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (f'{{"2": "{USDT}"}}', "asset 2 is not a token"),
        (f'{{"61": "{USDT}"}}', "asset 61 is not a token"),
        (f'{{"99": "{USDT}"}}', "asset 99 is not a token"),
        ('{"21": "0x5290840009852788"}', "asset 21 is not a 0x address"),
        ('{"21": "52908400098527886E0F7030069857D2E4169EE7"}', "asset 21 is not a 0x address"),
    ],
)
def test_evm_token_contracts_refuse_a_non_evm_token_or_a_malformed_address(
    monkeypatch: pytest.MonkeyPatch, raw: str, words: str
) -> None:
    monkeypatch.setenv("WALLETCORE_EVM_TOKENS", raw)
    with pytest.raises(ValidationError, match=words):
        EvmSettings()


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("evm_receipt_timeout_seconds", 0),
        ("evm_history_blocks", 0),
        ("evm_rpc_timeout_seconds", 601),
    ],
)
def test_evm_timings_are_bounded(name: str, bad: float) -> None:
    with pytest.raises(ValidationError):
        EvmSettings(**{name: bad})


def test_solana_settings_read_the_new_names_and_the_older_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (SolanaSettings().solana_rpc_url, SolanaSettings().solana_network) == (
        None,
        "mainnet",
    )
    monkeypatch.setenv("WALLETCORE_RPC_SOLANA", "http://older/solana")
    monkeypatch.setenv("WALLETCORE_NETWORK", "testnet")
    monkeypatch.setenv("WALLETCORE_SOLANA_RPC_TIMEOUT_SECONDS", "3")
    monkeypatch.setenv("WALLETCORE_RPC_TIMEOUT_SECONDS", "9")
    monkeypatch.setenv("WALLETCORE_SOLANA_USDT_MINT", "Mint1111")
    read = SolanaSettings()
    assert read.solana_rpc_url is not None
    assert read.solana_rpc_url.get_secret_value() == "http://older/solana"
    assert (read.solana_network, read.solana_rpc_timeout_seconds) == ("testnet", 3.0)
    assert (read.solana_usdt_mint, read.solana_usdc_mint) == ("Mint1111", None)


def test_the_sandbox_ledger_keeps_its_confirmation_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SandboxChainSettings().sandbox_confirm_seconds == 3.0
    monkeypatch.setenv("WALLETCORE_SANDBOX_CONFIRM_SECONDS", "0")
    assert SandboxChainSettings().sandbox_confirm_seconds == 0.0
    with pytest.raises(ValidationError):
        SandboxChainSettings(sandbox_confirm_seconds=-1)
