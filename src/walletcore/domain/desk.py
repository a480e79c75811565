"""The desk's accounting: what the reconciliation finds, and a pause of deliveries.

- A `Mismatch` is one difference between the ledger (the settlements) and the chain, or a
  settlement that needs the operator, named with the trades it concerns.
- A `DeskPause` stops the deliveries of one asset for one api client: while it stands, a
  buy's delivery of that asset is `short` with the pause's reason instead of sent. The
  reconciliation sets one when a shortfall exceeds the operator's tolerance; the operator
  sets and removes one (`walletcore desk pause|resume`). One per (client, asset).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class MismatchKind(StrEnum):
    #: the desk owes more deliveries of the asset than its address holds on chain
    DESK_SHORT = "desk_short"
    #: a user's wallet holds less on chain than its sells reserve
    WALLET_SHORT = "wallet_short"
    #: a buy's delivery failed on chain on its last attempt: it stays for the operator
    DELIVERY_FAILED = "delivery_failed"
    #: a sell's collection failed on chain: it waits for the next `/trade/collect`
    COLLECTION_FAILED = "collection_failed"
    #: a settlement shown `sent` whose send record ended `failed`
    TRANSFER_FAILED = "transfer_failed"
    #: a settlement `sent` for longer than the operator's threshold
    SENT_TOO_LONG = "sent_too_long"

    @property
    def is_shortfall(self) -> bool:
        """A difference of amounts (the ones a tolerance applies to)."""
        return self in (MismatchKind.DESK_SHORT, MismatchKind.WALLET_SHORT)


@dataclass(frozen=True, slots=True)
class Mismatch:
    kind: MismatchKind
    asset_id: int
    #: the trades it concerns, sorted
    trade_ids: tuple[str, ...]
    #: an operator's sentence (amounts, statuses; never a secret)
    detail: str
    #: a shortfall's amount in the asset's smallest units (0 for the other kinds)
    units: int = 0
    #: the user whose wallet is short (WALLET_SHORT only)
    user_id: str | None = None

    @property
    def key(self) -> str:
        """What identifies it from one run to the next: a shortfall by its asset (and
        wallet), whatever its amount and trades; the others by their trades."""
        if self.kind.is_shortfall:
            return f"{self.kind.value}:{self.asset_id}:{self.user_id or 'desk'}"
        return f"{self.kind.value}:{self.asset_id}:{','.join(self.trade_ids)}"


@dataclass(frozen=True, slots=True)
class DeskPause:
    client_id: str
    asset_id: int
    #: why (shown on the paused deliveries' settlements: never a secret)
    reason: str
    paused_at: datetime


__all__ = ["DeskPause", "Mismatch", "MismatchKind"]
