"""Helpers of the EVM gateway tests: keys from the real `ChainKey` signer and one transfer
through prepare -> sign (digest) -> assemble -> broadcast."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account import Account

from walletcore.container import create_container
from walletcore.domain.assets import Asset, Chain
from walletcore.ports import FeeQuote, SignedTransfer, Transfer, UnsignedTransfer
from walletcore.settings import Settings
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import EvmSettings
from walletcore_chains.keystore import ChainKey
from walletcore_chains.solana.plugin import SolanaSettings

#: a valid address outside every wallet made here
ELSEWHERE = "0x52908400098527886E0F7030069857D2E4169EE7"
#: the `evm` plugin's RPC endpoints, none of them listening
NOWHERE = {
    "ethereum_rpc_url": "http://127.0.0.1:1/eth",
    "bsc_rpc_url": "http://127.0.0.1:1/bsc",
    "polygon_rpc_url": "http://127.0.0.1:1/polygon",
}


def chain_gateways(
    home: Path,
    evm: EvmSettings,
    *,
    chains: str = "rpc",
    overrides: dict[str, Any] | None = None,
    **core: Any,
) -> dict[Chain, Any]:
    """The gateways the container builds for `WALLETCORE_CHAINS=chains`, with the `evm`
    plugin's settings `evm` (and a Solana node, a Bitcoin Esplora API and a TRON node
    that do not listen); `overrides`: the container's providers (`nonce_leases=...`)."""
    from walletcore_chains.bitcoin import BitcoinSettings
    from walletcore_chains.tron import TronSettings

    solana = SolanaSettings(solana_rpc_url="http://127.0.0.1:1/solana")
    bitcoin = BitcoinSettings(bitcoin_esplora_url="http://127.0.0.1:1/esplora")
    container = create_container(
        Settings(home=home, chains=chains, **core),
        chain_settings={
            "evm": evm,
            "solana": solana,
            "bitcoin": bitcoin,
            "tron": TronSettings(tron_node_url="http://127.0.0.1:1/tron"),
        },
        **(overrides or {}),
    )
    return container.gateways()


@dataclass
class Wallet:
    address: str
    key: ChainKey


def new_wallet() -> Wallet:
    account = Account.create()
    return Wallet(account.address, ChainKey(Chain.ETHEREUM, bytearray(account.key)))


def sign(gateway: EvmGateway, unsigned: UnsignedTransfer, *wallets: Wallet) -> SignedTransfer:
    signatures = {w.address: w.key.sign(unsigned.payload_for(w.address)) for w in wallets}
    return gateway.assemble(unsigned, signatures)


async def build(
    gateway: EvmGateway,
    asset: Asset,
    sender: Wallet,
    recipient: str,
    units: int,
    sponsor: Wallet | None = None,
    fee: FeeQuote | None = None,
) -> SignedTransfer:
    payer = sponsor.address if sponsor else sender.address
    quote = fee or await gateway.fee(sender.address, recipient, asset, units, fee_payer=payer)
    unsigned = await gateway.prepare(
        Transfer(asset, sender.address, recipient, units, fee_payer=payer), quote
    )
    return sign(gateway, unsigned, sender, *([sponsor] if sponsor else []))


async def send(
    gateway: EvmGateway,
    asset: Asset,
    sender: Wallet,
    recipient: str,
    units: int,
    sponsor: Wallet | None = None,
) -> str:
    signed = await build(gateway, asset, sender, recipient, units, sponsor)
    return await gateway.broadcast(signed)
