"""Helpers of the Solana gateway tests: keys from the real `ChainKey` signer (ed25519 over
the message) and one transfer through prepare -> sign -> assemble -> broadcast."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from walletcore.domain.assets import Asset, Chain
from walletcore.ports import SignedTransfer, Transfer
from walletcore_chains.keystore import ChainKey
from walletcore_chains.solana.gateway import SolanaGateway


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
