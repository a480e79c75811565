"""Helpers of the Solana gateway tests: keys from the real `ChainKey` signer (ed25519 over
the message), one transfer through prepare -> sign -> assemble -> broadcast, and the gateway
on the JSON-RPC engine."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from solders.litesvm import LiteSVM

from walletcore.domain.assets import Asset, Chain
from walletcore.ports import SignedTransfer, Transfer
from walletcore_chains.addresses import validate_address
from walletcore_chains.keystore import ChainKey
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.solana.rpc import RpcNode, rpc_client


@dataclass
class Wallet:
    address: str
    key: ChainKey


def new_wallet() -> Wallet:
    key = ChainKey(Chain.SOLANA, bytearray(secrets.token_bytes(32)))
    return Wallet(key.address, key)


async def build(
    gateway: SolanaGateway,
    asset: Asset,
    sender: Wallet,
    recipient: str,
    units: int,
    sponsor: Wallet | None = None,
) -> SignedTransfer:
    payer = sponsor.address if sponsor else sender.address
    quote = await gateway.fee(sender.address, recipient, asset, units, fee_payer=payer)
    unsigned = await gateway.prepare(
        Transfer(asset, sender.address, recipient, units, fee_payer=payer), quote
    )
    signers = [sender, *([sponsor] if sponsor else [])]
    signatures = {w.address: w.key.sign(unsigned.payload_for(w.address)) for w in signers}
    return gateway.assemble(unsigned, signatures)


async def send(
    gateway: SolanaGateway,
    asset: Asset,
    sender: Wallet,
    recipient: str,
    units: int,
    sponsor: Wallet | None = None,
) -> str:
    return await gateway.broadcast(await build(gateway, asset, sender, recipient, units, sponsor))


class RpcSolanaGateway(SolanaGateway):
    """The gateway on the JSON-RPC engine; `fund` pays from the devnet's faucet on the
    runtime the test node serves (the node of a real cluster has no faucet)."""

    def __init__(
        self, devnet: DevnetSolanaGateway, url: str, timeout: float = 5.0, **options: Any
    ) -> None:
        options.setdefault("confirm_poll", 0.05)
        super().__init__(
            RpcNode(rpc_client(url, timeout)), validate_address, devnet._mints, **options
        )
        self.devnet = devnet
        self.url = url

    @property
    def svm(self) -> LiteSVM:
        return self.devnet.node.svm

    async def fund(self, address: str, asset: Asset, units: int) -> int:
        await self.devnet.fund(address, asset, units)
        return await self.balance(address, asset)
