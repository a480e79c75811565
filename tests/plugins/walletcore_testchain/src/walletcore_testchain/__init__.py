"""walletcore_testchain: a third party's chain plugin, for the tests.

It replaces the gateway of ETHEREUM or SOLANA (whichever a deployment points at it:
`WALLETCORE_CHAIN_ETHEREUM=testchain`) with `RecordingGateway`, a chain kept in memory
that records every call. It defines no chain: addresses, signatures and keys stay those of
the chain's own plugin (`evm`, `solana`), handed over in the `GatewayContext`, so a
broadcast is refused unless each signer's signature verifies.

Its settings are its own (`RecordingSettings`, `WALLETCORE_TESTCHAIN_...`). Its only mode,
`fake`, is sandbox-only: the production profile refuses it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import ChainPlugin, GatewayContext, GatewayFactory
from walletcore.domain.assets import Asset, Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import InvalidRequest, TransactionNotFound, TransferRejected
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    AddressValidator,
    Clock,
    FeeQuote,
    SignatureVerifier,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)


class RecordingSettings(BaseSettings):
    """`WALLETCORE_TESTCHAIN_BALANCE_UNITS`, `WALLETCORE_TESTCHAIN_FEE_UNITS`."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_TESTCHAIN_", extra="ignore")

    #: What an address holds of each asset before any transfer, in base units.
    balance_units: int = Field(default=0, ge=0)
    #: The fee of every transfer, in the native coin's base units.
    fee_units: int = Field(default=21_000 * 10**9, ge=0)


@dataclass
class Sent:
    transfer: Transfer
    fee_units: int
    tx_hash: str


@dataclass
class RecordingGateway:
    """A `ChainGateway` in memory: balances start at the settings' figure, a broadcast
    moves them at once (`success`), and `calls` lists every call in order."""

    chain: Chain
    validator: AddressValidator
    verifier: SignatureVerifier
    settings: RecordingSettings
    clock: Clock
    #: the served assets (the container's catalog)
    catalog: Catalog
    calls: list[tuple[str, ...]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    moved: dict[tuple[str, int], int] = field(default_factory=dict)

    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self.validator(self.chain, address)

    async def balance(self, address: str, asset: Asset) -> int:
        self.calls.append(("balance", address, str(asset.id)))
        return self.settings.balance_units + self.moved.get((address, asset.id), 0)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        self.calls.append(("history", address, str(asset.id)))
        mine = [
            s for s in reversed(self.sent) if address in (s.transfer.sender, s.transfer.recipient)
        ]
        return [self._row(s, address) for s in mine if s.transfer.asset == asset][:limit]

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        self.calls.append(("lookup", address, str(asset.id), tx_hash))
        for s in self.sent:
            parties = (s.transfer.sender, s.transfer.recipient)
            if s.tx_hash == tx_hash and s.transfer.asset == asset and address in parties:
                return self._row(s, address)
        raise TransactionNotFound()

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        self.calls.append(("fee", sender, recipient, str(asset.id)))
        return FeeQuote(self.settings.fee_units)

    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        self.calls.append(("prepare", transfer.sender, transfer.recipient, str(transfer.asset.id)))
        body = json.dumps(
            {
                "chain": self.chain.value,
                "asset": transfer.asset.id,
                "from": transfer.sender,
                "to": transfer.recipient,
                "amount": transfer.amount_units,
                "fee": fee.native_units,
                "feePayer": transfer.fee_payer,
                "n": len(self.calls),
            },
            sort_keys=True,
        ).encode()
        # what the chain's keys sign: a 32-byte digest on secp256k1, the message on ed25519
        payload = body if self.chain == Chain.SOLANA else hashlib.sha256(body).digest()
        return UnsignedTransfer(transfer, fee, payload, body)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        raw = json.dumps(
            {
                "body": unsigned.body.decode(),
                "payload": unsigned.payload.hex(),
                "signatures": {a: s.hex() for a, s in signatures.items()},
            },
            sort_keys=True,
        ).encode()
        return SignedTransfer(raw, "0x" + hashlib.sha256(raw).hexdigest())

    async def broadcast(self, signed: SignedTransfer) -> str:
        self.calls.append(("broadcast", signed.tx_hash))
        if any(s.tx_hash == signed.tx_hash for s in self.sent):
            return signed.tx_hash  # already known
        envelope = json.loads(signed.raw)
        body = json.loads(envelope["body"])
        payload = bytes.fromhex(envelope["payload"])
        for signer, signature in envelope["signatures"].items():
            if not self.verifier(self.chain, signer, payload, bytes.fromhex(signature)):
                raise TransferRejected("Transfer rejected by the network: bad signature")
        asset = self.catalog.asset_by_id(body["asset"])
        transfer = Transfer(asset, body["from"], body["to"], body["amount"], body["feePayer"])
        self.sent.append(Sent(transfer, body["fee"], signed.tx_hash))
        key_from, key_to = (transfer.sender, asset.id), (transfer.recipient, asset.id)
        self.moved[key_from] = self.moved.get(key_from, 0) - transfer.amount_units
        self.moved[key_to] = self.moved.get(key_to, 0) + transfer.amount_units
        return signed.tx_hash

    async def release(self, unsigned: UnsignedTransfer) -> None:
        self.calls.append(("release", unsigned.transfer.sender))

    def _row(self, sent: Sent, address: str) -> TxRow:
        kind = "send" if sent.transfer.sender == address else "receive"
        return TxRow(
            sent.tx_hash,
            kind,
            sent.transfer.amount_units,
            sent.fee_units,
            "success",
            self.clock.now(),
        )


def _fake(context: GatewayContext[RecordingSettings]) -> RecordingGateway:
    return RecordingGateway(
        context.chain,
        context.validate_address,
        context.verify_signature,
        context.settings,
        context.clock,
        context.catalog,
    )


#: Entry point `walletcore.chains: testchain`.
PLUGIN: ChainPlugin[RecordingSettings] = ChainPlugin(
    name="testchain",
    chains=frozenset({Chain.ETHEREUM, Chain.SOLANA}),
    settings_model=RecordingSettings,
    gateways={"fake": GatewayFactory(_fake, sandbox_only=True)},
)

__all__ = ["PLUGIN", "RecordingGateway", "RecordingSettings", "Sent"]
