"""Ports of the chains: one gateway per chain (balances, history, fees, transfers) and the
values a transfer goes through: built, signed by the core, broadcast."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.chains import FeeQuote, SendMinimum
from walletcore.domain.wallet import TxRow

#: `validate(chain, address)` -> the normalised address, or `InvalidRequest` saying why.
AddressValidator = Callable[[Chain, str], str]
#: `verify(chain, address, payload, signature)` -> whether the key of `address` signed it.
SignatureVerifier = Callable[[Chain, str, bytes, bytes], bool]


@dataclass(frozen=True, slots=True)
class Transfer:
    """A transfer to build. `amount_units` is what the recipient receives; `fee_payer` is the
    address whose native coin pays the network fee (the sender, or a sponsor)."""

    asset: Asset
    sender: str
    recipient: str
    amount_units: int
    fee_payer: str

    @property
    def signers(self) -> tuple[str, ...]:
        """Who must sign: the sender, and the fee payer when it is someone else."""
        if self.fee_payer == self.sender:
            return (self.sender,)
        return (self.fee_payer, self.sender)


@dataclass(frozen=True, slots=True)
class UnsignedTransfer:
    """A built transfer awaiting its signatures.

    `payload` is what every signer signs (see `ChainSigner.sign`: a 32-byte digest on the
    secp256k1 chains, the message on SOLANA); `body` is the gateway's own encoding.
    """

    transfer: Transfer
    fee: FeeQuote
    payload: bytes
    body: bytes
    #: Per-signer payloads, when signers sign different things (an EVM sponsor signs its
    #: gas top-up, the sender its transfer); None: everyone signs `payload`.
    payloads: Mapping[str, bytes] | None = None

    def payload_for(self, signer: str) -> bytes:
        """What `signer` signs."""
        if self.payloads is None:
            return self.payload
        return self.payloads[signer]


@dataclass(frozen=True, slots=True)
class SignedTransfer:
    """A transfer ready to broadcast: the bytes the network takes and its hash."""

    raw: bytes = field(repr=False)
    tx_hash: str


class ChainGateway(Protocol):
    """One chain: addresses, balances, history, lookups, fees, and transfers.

    A transfer is built (`prepare`), signed by the core with keys from the `KeyStore` (never
    the gateway's own), put together (`assemble`) and broadcast. Broadcasting the same
    signed bytes again is harmless: the network knows them and answers the same hash.
    """

    chain: Chain

    def validate_address(self, address: object) -> str:
        """The address in its normalised form, or `InvalidRequest` saying what is wrong
        (checksum, network, encoding)."""
        ...

    async def balance(self, address: str, asset: Asset) -> int:
        """Base units held. BITCOIN may raise `AddressUnknown` (no transactions yet)."""
        ...

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        """Newest first, at most `limit`; `HistoryUnavailable` when it cannot be read now."""
        ...

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        """One transaction of this wallet and asset, or `TransactionNotFound`."""
        ...

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        """The fee of that transfer now (`fee_payer`: a sponsor, when not the sender)."""
        ...

    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        """Build `transfer`, paying `fee` (a quote of `fee()`), for signing."""
        ...

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        """The signed transaction, from one signature per `transfer.signers` address."""
        ...

    async def broadcast(self, signed: SignedTransfer) -> str:
        """Send it; the transaction hash. Already known to the network counts as sent.

        Raises `TransferRejected` or `InsufficientFunds` when the network refused it (nothing
        was sent), `ServiceUnavailable` when the node could not be reached (nothing was sent;
        the same bytes may be broadcast again) and `BroadcastTimeout` when the outcome is
        unknown.
        """
        ...

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """`unsigned` will never be broadcast (signing or storing it failed): give back what
        `prepare` reserved for it (an EVM nonce), so later transfers do not wait on it."""
        ...


@runtime_checkable
class MinimumSends(Protocol):
    """A gateway whose chain refuses a transfer that delivers too little (Bitcoin's dust
    limit, Solana's rent-exempt minimum of a new account). The core asks it before anything
    is signed, and refuses a `/send` or a `/fee` below it with a 400 naming the minimum. A
    gateway without it has no minimum beyond one base unit."""

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """The least a transfer of `asset` to `recipient` may deliver now; None: one base
        unit (the recipient's state may decide it: a Solana account that does not exist)."""
        ...


__all__ = [
    "AddressValidator",
    "ChainGateway",
    "FeeQuote",
    "MinimumSends",
    "SendMinimum",
    "SignatureVerifier",
    "SignedTransfer",
    "Transfer",
    "UnsignedTransfer",
]
