"""Helpers of the Bitcoin gateway tests: keys, signing as the KeyStore does, one send."""

from __future__ import annotations

import itertools
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.ports import FeeQuote, SignedTransfer, Transfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains import curves
from walletcore_chains.bitcoin import address_of, validate_address, verify_signature
from walletcore_chains.bitcoin.backend import BackendTimeout
from walletcore_chains.bitcoin.config import BitcoinSettings, make_backend
from walletcore_chains.bitcoin.gateway import BitcoinGateway, GatewayOptions
from walletcore_chains.bitcoin.network import network_named

BTC = CONTRACT_CATALOG.asset_by_id(1)
_counter = itertools.count(1000 + __import__("os").getpid() * 1000)


class Wallet:
    """A key the way the sealed KeyStore's `ChainKey` signs: n digests in, n signatures out,
    each checked against the address before it is handed out."""

    def __init__(self) -> None:
        self.secret = next(_counter).to_bytes(32, "big")
        self.address = address_of(curves.public_key("secp256k1", self.secret))

    def sign(self, payload: bytes) -> bytes:
        out = b"".join(
            curves.sign("secp256k1", self.secret, payload[i : i + 32])
            for i in range(0, len(payload), 32)
        )
        assert verify_signature(Chain.BITCOIN, self.address, payload, out)
        return out


def make_gateway(backend: str, url: str, confirmations: int = 2, **extra: Any) -> BitcoinGateway:
    key = "bitcoin_rpc_url" if backend == "core" else "bitcoin_esplora_url"
    settings = BitcoinSettings(
        bitcoin_network="regtest", bitcoin_backend=backend, **{key: url}, **extra
    )
    return BitcoinGateway(
        network_named("regtest"),
        make_backend(settings),  # type: ignore[arg-type]
        validate_address,
        options=GatewayOptions(confirmations=confirmations, index_wait=10),
    )


async def signed_transfer(
    gw: BitcoinGateway,
    sender: Wallet,
    recipient: str,
    units: int,
    *,
    sponsor: Wallet | None = None,
    fee_from_amount: bool = False,
) -> tuple[SignedTransfer, FeeQuote]:
    """Quote, prepare and sign a send, as the service does before it broadcasts."""
    payer = sponsor.address if sponsor else sender.address
    quote = await gw.fee(sender.address, recipient, BTC, units, fee_payer=payer)
    amount = units - quote.native_units if fee_from_amount else units
    unsigned = await gw.prepare(Transfer(BTC, sender.address, recipient, amount, payer), quote)
    signers = {sender.address: sender} | ({sponsor.address: sponsor} if sponsor else {})
    try:
        signatures = {
            a: signers[a].sign(unsigned.payload_for(a)) for a in unsigned.transfer.signers
        }
        signed = gw.assemble(unsigned, signatures)
    except BaseException:
        await gw.release(unsigned)
        raise
    return signed, quote


async def send(
    gw: BitcoinGateway,
    sender: Wallet,
    recipient: str,
    units: int,
    *,
    sponsor: Wallet | None = None,
    fee_from_amount: bool = False,
) -> tuple[str, FeeQuote]:
    signed, quote = await signed_transfer(
        gw, sender, recipient, units, sponsor=sponsor, fee_from_amount=fee_from_amount
    )
    return await gw.broadcast(signed), quote


class LostAnswer:
    """A backend whose first `timeouts` broadcasts reach the node and are accepted, then
    time out before the answer comes back (`BackendTimeout`: the outcome is unknown to the
    gateway). Everything else is the real backend's. `sent` holds every raw hex sent."""

    def __init__(self, inner: Any, timeouts: int = 1) -> None:
        self._inner = inner
        self.timeouts = timeouts
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def broadcast(self, raw_hex: str) -> str:
        self.sent.append(raw_hex)
        txid = await self._inner.broadcast(raw_hex)
        if self.timeouts > 0:
            self.timeouts -= 1
            raise BackendTimeout("ReadTimeout")
        return str(txid)
