"""Sandbox chain gateways: one per chain over the shared `SandboxLedger`, with real
signatures, and fees, hashes and minimums that follow each chain's model roughly. The chain
plugin `sandbox` (`PLUGIN`, sandbox profile only) serves every chain, with each chain's own
validator, verifier and description from the plugin that defines it.

How the ledger plays a chain is its description's `SandboxRules` (walletcore.domain.chains),
written by the chain's own plugin package (walletcore_chains: BITCOIN's vbytes and dust
limit, the EVM chains' gas and gas price, TRON's bandwidth and energy, SOLANA's signatures
and rent): the fee of a transfer, its minimum, its hash, whether the chain's keys sign the
body's SHA-256 or the body, whether its indexer knows only addresses it has seen. A chain
whose description brings no rules gets `FlatRules`: a flat fee of `FLAT_FEE_UNITS` native
base units, no minimum, the SHA-256 of the signed transaction as its hash (64 hex), and the
payload its curve signs (the digest on secp256k1, the body on ed25519).

A transfer's body is canonical JSON. A hash is looked up in the chain's form
(`ChainDescription.hashes`: hex in any case, base58 as it is).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import ChainPlugin, GatewayContext, GatewayFactory
from walletcore.domain.assets import CONTRACT_CHAINS, Asset, Chain
from walletcore.domain.chains import (
    ChainDescription,
    SandboxBook,
    SandboxRules,
)
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import (
    AddressUnknown,
    InvalidRequest,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    MEMPOOL,
    AddressValidator,
    ChainGateway,
    DepositScanner,
    FeeQuote,
    MinimumSends,
    SendMinimum,
    SignatureVerifier,
    SignedTransfer,
    Transfer,
    Unmined,
    UnsignedTransfer,
)
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile
from walletcore_sandbox.ledger import DATA_FILE, LedgerTx, SandboxLedger, row_of

#: The fee of a chain whose description brings no sandbox rules, in native base units.
FLAT_FEE_UNITS = 1_000


@dataclass(frozen=True, slots=True)
class FlatRules:
    """`SandboxRules` of a chain whose description brings none (see the module's
    docstring)."""

    signs_digest: bool = True
    seen_addresses_only: bool = False
    native_units: int = FLAT_FEE_UNITS

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        return FeeQuote(self.native_units)

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        return None

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return hashlib.sha256(raw).hexdigest()


class _Book:
    """The ledger as one chain's rules read it (`SandboxBook`)."""

    __slots__ = ("_chain", "_ledger")

    def __init__(self, ledger: SandboxLedger, chain: Chain) -> None:
        self._ledger = ledger
        self._chain = chain

    async def balance(self, address: str, asset: Asset) -> int:
        return await self._ledger.balance(self._chain, address, asset.id)

    async def has_received(self, address: str, asset: Asset) -> bool:
        return await self._ledger.has_received(self._chain, address, asset.id)


class SandboxGateway(ChainGateway, MinimumSends, DepositScanner):
    def __init__(
        self,
        description: ChainDescription,
        ledger: SandboxLedger,
        validator: AddressValidator,
        *,
        signs_digest: bool = True,
    ) -> None:
        """`description`: the chain's, whose `sandbox` rules it follows; `signs_digest`:
        whether the chain's keys sign the body's SHA-256 (secp256k1) or the body itself
        (ed25519), for a chain whose description brings no rules."""
        self.chain = description.chain
        self._description = description
        self._ledger = ledger
        self._book = _Book(ledger, self.chain)
        self._validator = validator
        rules: SandboxRules | None = description.sandbox
        self._rules: SandboxRules = rules or FlatRules(signs_digest=signs_digest)

    def __repr__(self) -> str:
        return f"SandboxGateway({self.chain.value})"

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    async def balance(self, address: str, asset: Asset) -> int:
        if self._rules.seen_addresses_only:  # an indexer knows only addresses it has seen
            known = await self._ledger.known_balance(self.chain, address, asset.id)
            if known is None:
                raise AddressUnknown()
            return known
        return await self._ledger.balance(self.chain, address, asset.id)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        return await self._ledger.history(self.chain, address, asset.id, limit)

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        tx = await self._ledger.find(self._description.hashes.normalise(tx_hash))
        if tx is None or tx.chain != self.chain or tx.asset_id != asset.id:
            raise TransactionNotFound()
        if address not in (tx.sender, tx.recipient):
            raise TransactionNotFound()
        return row_of(tx, address, self._ledger.now())

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        sponsored = fee_payer is not None and fee_payer != sender
        return await self._rules.fee(self._book, recipient, asset, sponsored=sponsored)

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """The chain's minimum by its rules (BITCOIN's dust limit, SOLANA's rent-exempt
        minimum of a new account); None on the others."""
        return await self._rules.minimum_send(self._book, recipient, asset)

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        if transfer.asset.chain != self.chain:
            raise ValueError(f"{transfer.asset.symbol} is not on {self.chain}")
        body = _canonical(
            {
                "v": 1,
                "chain": self.chain.value,
                "asset": transfer.asset.id,
                "from": transfer.sender,
                "to": transfer.recipient,
                "amount": transfer.amount_units,
                "fee": fee.native_units,
                "feePayer": transfer.fee_payer,
                "nonce": secrets.token_hex(16),
            }
        )
        return UnsignedTransfer(transfer, fee, self._payload(body), body)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        signers = unsigned.transfer.signers
        if set(signatures) != set(signers):
            raise ValueError("one signature per signer is needed")
        raw = _canonical(
            {
                "body": unsigned.body.decode("utf-8"),
                "signatures": [[s, signatures[s].hex()] for s in signers],
            }
        )
        return SignedTransfer(raw, self._hash(unsigned.body, raw, signatures[signers[0]]))

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            envelope = json.loads(signed.raw)
            body_text: str = envelope["body"]
            body = json.loads(body_text)
            signatures = {str(a): bytes.fromhex(s) for a, s in envelope["signatures"]}
            tx = LedgerTx(
                tx_hash=signed.tx_hash,
                chain=Chain(body["chain"]),
                asset_id=int(body["asset"]),
                sender=str(body["from"]),
                recipient=str(body["to"]),
                amount_units=int(body["amount"]),
                fee_units=int(body["fee"]),
                fee_payer=str(body["feePayer"]),
                accepted_at=self._ledger.now(),
                confirm_at=self._ledger.now(),
            )
        except (ValueError, KeyError, TypeError):
            raise TransferRejected("Transfer rejected by the network: malformed transaction")
        raw_body = body_text.encode("utf-8")
        first = signatures.get(tx.fee_payer or "", b"")
        if tx.chain != self.chain or self._hash(raw_body, signed.raw, first) != tx.tx_hash:
            raise TransferRejected("Transfer rejected by the network: malformed transaction")
        if tx.amount_units <= 0 or tx.fee_units < 0:
            raise TransferRejected("Transfer rejected by the network: invalid amount")
        await self._ledger.accept(tx, self._payload(raw_body), signatures)
        return tx.tx_hash

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """Nothing to give back: a sandbox transfer reserves nothing."""

    # -- deposits (walletcore.ports.deposits) ------------------------------------------
    #: The ledger's entries are its blocks (`SandboxLedger.entries`): one is final once
    #: it confirmed (`confirm_at`; a faucet credit at once), so one block deep is enough.
    confirmations = 1
    scan_span = 10_000

    async def head(self) -> BlockRef:
        height, tx_hash = await self._ledger.head()
        return BlockRef(height, tx_hash)

    async def block(self, height: int) -> BlockRef | None:
        found = await self._ledger.entry_at(height)
        return None if found is None else BlockRef(*found)

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        """The chain's transactions in `first..last` to `addresses`; one not confirmed yet
        is reported as unmined (its block once it confirmed, by `locate`)."""
        watched = addresses if isinstance(addresses, (set, frozenset, dict)) else set(addresses)
        now = self._ledger.now()
        return [
            Incoming(
                chain=self.chain,
                tx_hash=tx.tx_hash,
                position="tx",
                address=tx.recipient,
                asset_id=tx.asset_id,
                amount_units=tx.amount_units,
                block=BlockRef(height, tx.tx_hash) if tx.confirmed(now) else None,
                sender=tx.sender,
            )
            for height, tx in await self._ledger.entries(self.chain, first, last)
            if tx.recipient in watched
        ]

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        return []  # unconfirmed entries are reported by `scan` as unmined

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        tx = await self._ledger.find(tx_hash)
        height = await self._ledger.height_of(tx_hash)
        if tx is None or height is None:
            return None
        return BlockRef(height, tx.tx_hash) if tx.confirmed(self._ledger.now()) else MEMPOOL

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Nothing to start: the ledger opens its database on first use."""

    async def aclose(self) -> None:
        """Close the ledger's connection (shared by the container's sandbox gateways; the
        next call opens it again)."""
        await self._ledger.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the ledger (this sandbox's node) answers a read."""
        await self._ledger.knows(self.chain, "")

    # -- the sandbox faucet -------------------------------------------------------------
    async def fund(self, address: str, asset: Asset, units: int) -> int:
        """Credit `units` of `asset` to `address` (confirmed at once); the new balance."""
        if asset.chain != self.chain:
            raise InvalidRequest(f"asset {asset.id} is not on {self.chain}")
        if units <= 0:
            raise InvalidRequest("amount must be greater than zero")
        noise = secrets.token_bytes(64)
        tx_hash = self._hash(noise, noise, noise)
        return await self._ledger.credit(self.chain, address, asset.id, units, tx_hash)

    # -- chain formats ------------------------------------------------------------------
    def _payload(self, body: bytes) -> bytes:
        return hashlib.sha256(body).digest() if self._rules.signs_digest else body

    def _hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return self._rules.tx_hash(body, raw, first_signature)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


class SandboxChainSettings(BaseSettings):
    """Settings of the `sandbox` chain plugin."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: Seconds from broadcast until a transaction reads `success`
    #: (`WALLETCORE_SANDBOX_CONFIRM_SECONDS`).
    sandbox_confirm_seconds: float = Field(default=3.0, ge=0, le=3600)


def _ledger_gateway(context: GatewayContext[SandboxChainSettings]) -> SandboxGateway:
    """One chain's gateway on the ledger every sandbox chain of the container shares, in
    `WALLETCORE_HOME/sandbox-chain.db`; signatures are checked with each chain's own
    verifier, and the payload signed follows the chain's curve."""
    if context.core.profile is not Profile.SANDBOX:
        raise ConfigurationError(
            "the sandbox chain is a sandbox adapter; the production profile refuses it"
        )
    verifiers: dict[Chain, SignatureVerifier] = context.shared("verifiers", dict)
    verifiers[context.chain] = context.verify_signature

    def verify(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
        own = verifiers.get(chain)
        return own is not None and own(chain, address, payload, signature)

    ledger = context.shared(
        "ledger",
        lambda: SandboxLedger(
            Path(context.core.home) / DATA_FILE,
            context.clock,
            verify,
            confirm_seconds=context.settings.sandbox_confirm_seconds,
            catalog=context.catalog,
        ),
    )
    return SandboxGateway(
        context.description,
        ledger,
        context.validate_address,
        signs_digest=context.keys.curve == "secp256k1",
    )


#: Entry point `walletcore.chains: sandbox`: every chain on the sandbox ledger (sandbox
#: profile only). It stands in for a chain that has no gateway of the mode asked for, and
#: serves a chain another plugin adds when the deployment names it with it
#: (`WALLETCORE_CHAIN_<CHAIN>=sandbox`; `chainplugins.planning`), by that chain's rules.
PLUGIN: ChainPlugin[SandboxChainSettings] = ChainPlugin(
    name="sandbox",
    chains=frozenset(CONTRACT_CHAINS),
    settings_model=SandboxChainSettings,
    gateways={"sandbox": GatewayFactory(_ledger_gateway, sandbox_only=True)},
)


__all__ = [
    "FLAT_FEE_UNITS",
    "PLUGIN",
    "FlatRules",
    "SandboxChainSettings",
    "SandboxGateway",
]
