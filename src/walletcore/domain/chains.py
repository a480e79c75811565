"""What a chain is, told by the plugin that defines it (docs/chains.md, "Writing a chain
plugin"): `ChainDescription`, the way an exchange library's `describe()` tells what an
exchange has.

The core, the HTTP binding and the sandbox ask a chain's description instead of switching
on its name: the answer to a wrong wallet password, the default fee cap, the `/fee` wire
shape, how a stuck transfer is replaced, the form of its transaction hashes, and how the
sandbox ledger plays the chain (`SandboxRules`). A description is a plain value: it
imports no chain library, and the plugin builds it at import time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Literal, Protocol

from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.errors import (
    DomainError,
    InvalidCredentials,
    InvalidPassword,
    InvalidPasswordBadRequest,
)

#: How a transfer that cannot land as it is gets replaced: `fee-bump`, another
#: transaction at a higher fee pre-signed on the same inputs or nonce (BITCOIN's RBF, the
#: EVM's same-nonce replacement); `re-sign`, signed again once the first has expired (a
#: SOLANA blockhash, a TRON reference block).
ReplacesBy = Literal["fee-bump", "re-sign"]
#: `/fee`'s result on the wire: `decimal`, a decimal string in the native coin;
#: `resources`, TRON's `{bandwidth, energy}` object (`energy` for tokens only).
FeeWire = Literal["decimal", "resources"]


class WrongPassword(Enum):
    """The spec's answer to a wrong wallet password on a `/send` of the chain."""

    #: `401 Invalid credentials`
    INVALID_CREDENTIALS = "INVALID_CREDENTIALS"
    #: `401 Invalid password`
    INVALID_PASSWORD = "INVALID_PASSWORD"
    #: `400 Invalid password`
    INVALID_PASSWORD_400 = "INVALID_PASSWORD_400"

    def error(self) -> DomainError:
        """The error the wire answers with."""
        if self is WrongPassword.INVALID_PASSWORD:
            return InvalidPassword()
        if self is WrongPassword.INVALID_PASSWORD_400:
            return InvalidPasswordBadRequest()
        return InvalidCredentials()


@dataclass(frozen=True, slots=True)
class HashFormat:
    """The form of the chain's transaction hashes.

    `hex`: hexadecimal digits, after `prefix` (`0x` on the EVM chains, none on BITCOIN and
    TRON), any case on input, lower case once normalised. `base58`: case-sensitive, kept as
    it is (SOLANA's first signature).
    """

    alphabet: Literal["hex", "base58"]
    prefix: str = ""

    @property
    def case_sensitive(self) -> bool:
        return self.alphabet == "base58"

    def normalise(self, tx_hash: str) -> str:
        """The hash as it is stored and looked up: hex in lower case, base58 as given."""
        return tx_hash if self.case_sensitive else tx_hash.lower()


#: The chains' two hash forms without a prefix.
HEX = HashFormat("hex")
BASE58 = HashFormat("base58")


@dataclass(frozen=True, slots=True)
class FeeQuote:
    """A fee in the chain's native base units; TRON adds bandwidth and energy."""

    native_units: int
    bandwidth: int | None = None
    energy: int | None = None


@dataclass(frozen=True, slots=True)
class SendMinimum:
    """The least a transfer may deliver to one recipient, in the asset's base units, and
    the chain's rule that sets it, as a refusal says it ("the dust limit of its address
    type")."""

    units: int
    rule: str


class SandboxBook(Protocol):
    """What the sandbox ledger tells a chain's rules about an address on that chain."""

    async def balance(self, address: str, asset: Asset) -> int:
        """The address's confirmed balance of `asset`, in base units (0 when unknown)."""
        ...

    async def has_received(self, address: str, asset: Asset) -> bool:
        """Whether `asset` was ever credited to the address."""
        ...


class SandboxRules(Protocol):
    """How the sandbox ledger (`walletcore_sandbox`) plays one chain: its fee model, its
    transaction hashes, its minimum send, what its keys sign, and what its indexer knows.
    Implemented by the chain's plugin package; the sandbox gateway delegates to it."""

    @property
    def signs_digest(self) -> bool:
        """Whether the chain's keys sign the SHA-256 of a sandbox transfer's body
        (secp256k1) rather than the body itself (ed25519)."""
        ...

    @property
    def seen_addresses_only(self) -> bool:
        """Whether the chain's indexer knows only addresses it has seen on chain (a balance
        of an address never seen is `AddressUnknown`, as an Esplora indexer answers)."""
        ...

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        """The fee of a transfer of `asset` to `recipient`; `sponsored`: another wallet
        than the sender pays it."""
        ...

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        """The least a transfer to `recipient` may deliver now; None: one base unit."""
        ...

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        """The hash of a sandbox transaction in the chain's form, from its canonical body,
        its signed envelope (`raw`) and the fee payer's signature."""
        ...


@dataclass(frozen=True)
class ChainDescription:
    """Everything the core, the binding and the sandbox need to know of one chain, declared
    by the plugin that defines it (`ChainPlugin.describes`)."""

    chain: Chain
    #: The chain's assets in catalog order: its native coin first, then its tokens.
    #: Token contracts per network stay in the plugin's own configuration.
    assets: tuple[Asset, ...]
    #: How a stuck or expired transfer is replaced (`ReplacesBy`); it agrees with the
    #: gateways' `TransferFollower.resigns` (checked when the gateways are built).
    replaces_by: ReplacesBy
    #: The most one transaction of a transfer may cost in fees, in the native coin, when
    #: the operator sets no cap for the chain (`WALLETCORE_FEE_CAPS`).
    default_fee_cap: Decimal
    #: The answer to a wrong wallet password on a `/send`.
    wrong_password: WrongPassword
    #: The form of its transaction hashes.
    hashes: HashFormat
    #: `/fee`'s wire shape.
    fee_wire: FeeWire = "decimal"
    #: Whether a transfer carries a memo (none of the contract's chains does).
    memos: bool = False
    #: Who may pay a token transfer's network fee: the user, or the platform's wallet.
    fee_payers: frozenset[FeePayer] = field(
        default_factory=lambda: frozenset({FeePayer.USER, FeePayer.PLATFORM})
    )
    #: How the sandbox ledger plays the chain; None: a flat fee of
    #: `walletcore_sandbox.chain.FLAT_FEE_UNITS` base units, hex hashes, no minimum.
    sandbox: SandboxRules | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.assets:
            raise ValueError(f"the description of {self.chain} names no asset")
        strays = [a.id for a in self.assets if a.chain != self.chain]
        if strays:
            raise ValueError(f"assets {strays} are not on {self.chain}")
        natives = [a for a in self.assets if a.is_native]
        if len(natives) != 1 or not self.assets[0].is_native:
            raise ValueError(f"{self.chain}'s assets start with its one native coin")
        if self.replaces_by not in ("fee-bump", "re-sign"):
            raise ValueError(f"replaces_by is fee-bump or re-sign, not {self.replaces_by!r}")
        if self.fee_wire not in ("decimal", "resources"):
            raise ValueError(f"fee_wire is decimal or resources, not {self.fee_wire!r}")
        if not self.default_fee_cap > 0:
            raise ValueError(f"{self.chain}'s default fee cap must be positive")

    @property
    def native(self) -> Asset:
        """The chain's own coin."""
        return self.assets[0]

    @property
    def token_standards(self) -> frozenset[str]:
        """The standards of its tokens (`ERC20`, `TRC20`, ...)."""
        return frozenset(a.standard for a in self.assets if a.standard is not None)

    @property
    def resigns(self) -> bool:
        """Whether a transfer that can no longer land is signed again."""
        return self.replaces_by == "re-sign"


def described(descriptions: Iterable[ChainDescription]) -> dict[Chain, ChainDescription]:
    """Chain -> description; two descriptions of one chain are refused."""
    out: dict[Chain, ChainDescription] = {}
    for description in descriptions:
        if description.chain in out:
            raise ValueError(f"{description.chain} is described twice")
        out[description.chain] = description
    return out


__all__ = [
    "BASE58",
    "HEX",
    "ChainDescription",
    "FeeQuote",
    "FeeWire",
    "HashFormat",
    "ReplacesBy",
    "SandboxBook",
    "SandboxRules",
    "SendMinimum",
    "WrongPassword",
    "described",
]
