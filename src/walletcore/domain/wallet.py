"""Wallet records: sealed seeds and their derived addresses, per user or per api client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from walletcore.domain.assets import Chain


class WalletOwner(StrEnum):
    USER = "user"
    PLATFORM = "platform"


@dataclass(frozen=True, slots=True)
class WalletRecord:
    """What the storage keeps of a wallet. `sealed` is the KeyStore's opaque ciphertext."""

    client_id: str
    owner: WalletOwner
    #: The user id for a user wallet; None for the client's platform wallet.
    user_id: str | None
    sealed: bytes = field(repr=False)
    addresses: Mapping[Chain, str]
    created_at: datetime
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TxRow:
    """A chain-agnostic transaction row, in domain types (the binding formats it)."""

    hash: str
    type: str | None  # "send" | "receive" | None (EVM token lookup without a Transfer log)
    amount_units: int | None
    fee_units: int
    status: str  # "pending" | "success" | "failed"
    date: datetime | None
