"""SOLANA as the core sees it: its description (`DESCRIPTION`) and how the sandbox ledger
plays it (`SandboxSolana`). Imports no chain library beyond base58."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import base58

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.chains import (
    BASE58,
    ChainDescription,
    FeeQuote,
    SandboxBook,
    SendMinimum,
    WrongPassword,
)

CHAIN = Chain.SOLANA
#: the rule of SOLANA's minimum, as a refusal names it
RENT_RULE = "the rent-exempt minimum of a new SOLANA account"


@dataclass(frozen=True, slots=True)
class SandboxSolana:
    """`SandboxRules` of SOLANA: 5,000 lamports per signature (two when a sponsor pays),
    plus the rent of the recipient's associated token account (2,039,280 lamports) on an
    SPL transfer to an address that has none; the rent-exempt minimum of a new account
    (890,880 lamports) for a native transfer to an address that holds no SOL. ed25519 keys
    sign the body itself; the hash is the base58 of the first signature."""

    lamports_per_signature: int = 5_000
    token_account_rent: int = 2_039_280
    #: the rent-exempt minimum of an account with no data: the least SOL a new one takes
    account_rent: int = 890_880
    signs_digest: bool = False
    seen_addresses_only: bool = False

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        lamports = self.lamports_per_signature * (2 if sponsored else 1)
        if not asset.is_native and not await book.has_received(recipient, asset):
            lamports += self.token_account_rent
        return FeeQuote(lamports)

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        if asset.is_native and await book.balance(recipient, asset) == 0:
            return SendMinimum(self.account_rent, RENT_RULE)
        return None

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return base58.b58encode(first_signature).decode("ascii")


DESCRIPTION = ChainDescription(
    chain=CHAIN,
    assets=tuple(a for a in CONTRACT_ASSETS if a.chain == CHAIN),
    replaces_by="re-sign",
    default_fee_cap=Decimal("0.001"),
    wrong_password=WrongPassword.INVALID_PASSWORD,
    hashes=BASE58,
    sandbox=SandboxSolana(),
)

__all__ = ["CHAIN", "DESCRIPTION", "RENT_RULE", "SandboxSolana"]
