"""TRON as the core sees it: its description (`DESCRIPTION`) and how the sandbox ledger
plays it (`SandboxTron`). Imports no chain library."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.chains import (
    HEX,
    ChainDescription,
    FeeQuote,
    SandboxBook,
    SendMinimum,
    WrongPassword,
)

CHAIN = Chain.TRON


@dataclass(frozen=True, slots=True)
class SandboxTron:
    """`SandboxRules` of TRON: bandwidth (268 bytes for TRX, 345 for TRC20) and, for
    TRC20, energy (65,000, or 130,000 when the recipient never held the token), burned as
    TRX when not staked (sandbox accounts stake nothing): 1,000 sun per bandwidth point,
    210 sun per energy unit. The hash is the SHA-256 of the body (a TRON txID is the
    SHA-256 of its raw data); no minimum."""

    native_bandwidth: int = 268
    token_bandwidth: int = 345
    energy_holder: int = 65_000
    energy_new_holder: int = 130_000
    sun_per_bandwidth: int = 1_000
    sun_per_energy: int = 210
    signs_digest: bool = True
    seen_addresses_only: bool = False

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        if asset.is_native:
            bandwidth = self.native_bandwidth
            return FeeQuote(bandwidth * self.sun_per_bandwidth, bandwidth=bandwidth)
        bandwidth = self.token_bandwidth
        holder = await book.has_received(recipient, asset)
        energy = self.energy_holder if holder else self.energy_new_holder
        units = bandwidth * self.sun_per_bandwidth + energy * self.sun_per_energy
        return FeeQuote(units, bandwidth=bandwidth, energy=energy)

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        return None

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return hashlib.sha256(body).hexdigest()


DESCRIPTION = ChainDescription(
    chain=CHAIN,
    assets=tuple(a for a in CONTRACT_ASSETS if a.chain == CHAIN),
    replaces_by="re-sign",
    default_fee_cap=Decimal(100),
    wrong_password=WrongPassword.INVALID_CREDENTIALS,
    hashes=HEX,
    fee_wire="resources",
    sandbox=SandboxTron(),
)

__all__ = ["CHAIN", "DESCRIPTION", "SandboxTron"]
