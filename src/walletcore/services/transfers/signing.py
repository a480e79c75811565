"""Signing a transfer (docs/transfers.md): the fee caps (`TransferSettings`, each chain's
default from its description: `FeeCaps`), the ladder of
pre-signed replacements under them, and `sign_transfer`, which signs a transfer and its
rungs in one unseal per wallet.

A send is signed with its ladder (`ladder`): the rungs a `TransferFollower` gateway offers
under the chain's cap, signed now so that the follow job can bump or cancel without a
password. A gateway that re-signs instead (SOLANA, TRON) offers none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Chain
from walletcore.domain.chains import ChainDescription
from walletcore.domain.errors import ServerError, WrongWalletPassword
from walletcore.domain.money import to_base_units
from walletcore.domain.wallet import WalletRecord
from walletcore.ports import (
    ChainGateway,
    ChainSigner,
    KeyStore,
    SignedTransfer,
    UnsignedTransfer,
)
from walletcore.ports.follow import Replacement, TransferFollower
from walletcore.services.send_record import Attempt


class TransferSettings(BaseSettings):
    """`WALLETCORE_FEE_BUMP`, `WALLETCORE_FEE_CAPS` (docs/transfers.md)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: `auto`: the follow job bumps stuck sends, re-fills dropped ones and re-signs expired
    #: platform sends; `manual`: only `walletcore sends bump|cancel` replaces (a dropped
    #: send's same bytes are still broadcast again: that replaces nothing).
    fee_bump: Literal["auto", "manual"] = "auto"
    #: Chain -> the most one transaction of a transfer may cost in fees, in the chain's
    #: native coin (a decimal string); a chain left out keeps its description's
    #: `default_fee_cap`.
    fee_caps: dict[Chain, Decimal] = Field(default_factory=dict)

    def cap_units(self, description: ChainDescription) -> int:
        """The described chain's cap in its native coin's base units: the one set, else
        its description's default."""
        cap = self.fee_caps.get(description.chain, description.default_fee_cap)
        return to_base_units(cap, description.native.decimals)

    @property
    def automatic(self) -> bool:
        return self.fee_bump == "auto"


@dataclass(frozen=True, slots=True)
class Wallets:
    """The wallets a transfer is signed with: the sender's, and the sponsor's when the
    platform pays the fee of a user's send."""

    sender: WalletRecord
    sponsor: WalletRecord | None = None


#: A platform wallet (a sender or a sponsor) that the operator's master key cannot open.
PLATFORM_UNOPENABLE = "The platform wallet cannot be opened; contact the operator"


async def sign_transfer(
    keystore: KeyStore,
    gateway: ChainGateway,
    unsigned: UnsignedTransfer,
    wallets: Wallets,
    password: str | None,
    replacements: Sequence[Replacement] = (),
) -> tuple[SignedTransfer, tuple[Attempt, ...]]:
    """Sign `unsigned` and the rungs of its ladder in one unseal per wallet; the signed
    transfer and the signed rungs (not broadcast: `at` None)."""
    chain = gateway.chain
    transfer = unsigned.transfer
    todo = [unsigned, *(r.unsigned for r in replacements)]
    signatures: list[dict[str, bytes]] = [{} for _ in todo]
    try:
        async with keystore.unseal(wallets.sender.sealed, password, chain) as key:
            for index, item in enumerate(todo):
                if transfer.sender in item.transfer.signers:
                    signatures[index][transfer.sender] = _sign_as(
                        key, transfer.sender, item.payload_for(transfer.sender)
                    )
    except WrongWalletPassword:
        if password is None:  # the platform wallet: the operator's master key changed
            raise ServerError(PLATFORM_UNOPENABLE) from None
        raise
    if wallets.sponsor is not None:
        payer = transfer.fee_payer
        try:
            async with keystore.unseal(wallets.sponsor.sealed, None, chain) as key:
                for index, item in enumerate(todo):
                    if payer in item.transfer.signers:
                        signatures[index][payer] = _sign_as(key, payer, item.payload_for(payer))
        except WrongWalletPassword:
            # the sponsor is the platform wallet, whatever the sender's password: never the
            # user's wrong-password answer for an operator's problem
            raise ServerError(PLATFORM_UNOPENABLE) from None
    signed = gateway.assemble(unsigned, signatures[0])
    rungs = tuple(
        Attempt(r.kind, s.tx_hash, s.raw, r.fee_units)
        for r, s in (
            (r, gateway.assemble(r.unsigned, sigs))
            for r, sigs in zip(replacements, signatures[1:], strict=True)
        )
    )
    return signed, rungs


def _sign_as(key: ChainSigner, address: str, payload: bytes) -> bytes:
    """Sign only with the key of the stored address (a mismatch would send from elsewhere)."""
    if key.address != address:
        raise ServerError("The wallet's key does not match its stored address")
    return key.sign(payload)


def follower(gateway: ChainGateway | None) -> TransferFollower | None:
    return gateway if isinstance(gateway, TransferFollower) else None


@dataclass(frozen=True)
class FeeCaps:
    """Each chain's fee cap: the one `WALLETCORE_FEE_CAPS` sets, else the default of the
    chain's description (the served chains', from the container)."""

    settings: TransferSettings
    descriptions: Mapping[Chain, ChainDescription]

    def description(self, chain: Chain) -> ChainDescription:
        """The chain's description; a chain no plugin describes is a server error."""
        found = self.descriptions.get(chain)
        if found is None:
            raise ServerError(f"no installed chain plugin describes {chain}")
        return found

    def units(self, chain: Chain) -> int:
        """The most one transaction of a transfer on `chain` may cost in fees, in its
        native coin's base units."""
        return self.settings.cap_units(self.description(chain))


def ladder(caps: FeeCaps, gateway: ChainGateway, unsigned: UnsignedTransfer) -> list[Replacement]:
    """The rungs to sign with `unsigned` (none when its gateway re-signs instead)."""
    chain_follower = follower(gateway)
    if chain_follower is None or chain_follower.resigns:
        return []
    cap = caps.units(gateway.chain)
    rungs = list(chain_follower.replacements(unsigned, cap))
    for rung in rungs:
        if rung.fee_units > cap:  # a gateway's bug must never spend past the cap
            raise ServerError("a replacement's fee crosses the cap; nothing was signed")
    return rungs


__all__ = [
    "PLATFORM_UNOPENABLE",
    "FeeCaps",
    "TransferSettings",
    "Wallets",
    "follower",
    "ladder",
    "sign_transfer",
]
