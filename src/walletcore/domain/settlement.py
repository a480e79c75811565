"""A trade's crypto leg moved on chain: a buy delivered from the desk, a sell collected to it.

The desk is the api client's platform wallet: it holds the operator's inventory. A trade
that moves coins has one `Settlement` (keyed by the trade), stored beside the trade and
moved by compare-and-set on (status, attempt), each move with its audit entry and its
event in the same write unit:

    both:  approve --> reserved (written before the venue is called)
    sell:  reserved --(trade completed)--> awaiting_password --(/trade/collect)--> sent --> settled
                          |                  \\--(password given at approve)---------------/     \\--> failed --(/trade/collect)--> sent
                          \\--(trade failed, expired, reopened)--> released

    buy:   reserved --(trade completed)--> queued --(job)--> sent --> settled
                           \\--> short --(job, inventory topped up)--> sent
                                                  sent --> failed --(job: next attempt)--> queued

- The settlement is written at approval, before the venue is called: a process killed
  between the fill and the transfer leaves it `reserved`, and the jobs (which look at
  every `reserved` settlement whose trade has ended) carry it on after a restart.
- A sell's coins are held (`holds`) from its approval until its collection is final on
  chain or the trade ends without a fill: `/sell`, its approval and `/send` see the
  wallet's balance less what its settlements hold (docs/settlement.md).
- Each transfer is a send record of its own, keyed by `request_id` (`transfer_key`): the
  trade id and the attempt, under a prefix no client's X-Request-Id may use. So a delivery
  or a collection is signed and broadcast at most once per attempt, replayed on a retry,
  and followed to its end by the transfer lifecycle like any send.
- A new attempt (a new key) is made only after the previous transfer failed on chain
  (nothing was delivered): never while one may still land.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from walletcore.domain.trade import Side

#: X-Request-Ids the service keeps for its own transfers; a client's `/send` may not use one.
RESERVED_REQUEST_PREFIX = "walletcore:"


class SettlementStatus(StrEnum):
    #: approved: a sell's coins are held in the user's wallet until collected; a buy is
    #: owed by the desk once it completes (the jobs watch the trade in this status)
    RESERVED = "reserved"
    #: a sell completed: the collection waits for the wallet password (`/trade/collect`)
    AWAITING_PASSWORD = "awaiting_password"
    #: a buy completed: its delivery is the jobs' to send
    QUEUED = "queued"
    #: a buy the desk cannot deliver yet (inventory, fee coin, no platform wallet, paused):
    #: tried again by the jobs; `reason` says why
    SHORT = "short"
    #: the transfer was accepted by the network and is followed to its end
    SENT = "sent"
    #: the transfer succeeded on chain: the trade's coins have moved
    SETTLED = "settled"
    #: the transfer failed on chain (nothing moved): a buy is retried by the jobs, a sell
    #: by the next `/trade/collect`; after the last attempt it stays here for the operator
    FAILED = "failed"
    #: a sell that did not complete: nothing to collect, its hold is gone
    RELEASED = "released"

    @property
    def holds(self) -> bool:
        """Whether a sell in this status still holds its coins in the user's wallet."""
        return self in HOLDING_STATUSES


#: The statuses in which a sell's coins are held in the wallet (not yet collected).
HOLDING_STATUSES = frozenset(
    {
        SettlementStatus.RESERVED,
        SettlementStatus.AWAITING_PASSWORD,
        SettlementStatus.SENT,
        SettlementStatus.FAILED,
    }
)
#: The statuses the settlement job works on: deliveries to send or retry, transfers to follow.
DUE_STATUSES = frozenset(
    {
        SettlementStatus.RESERVED,
        SettlementStatus.QUEUED,
        SettlementStatus.SHORT,
        SettlementStatus.SENT,
        SettlementStatus.FAILED,
    }
)
#: Statuses after which nothing more happens.
FINAL_STATUSES = frozenset({SettlementStatus.SETTLED, SettlementStatus.RELEASED})


def transfer_key(side: Side, trade_id: str, attempt: int) -> str:
    """The idempotency key (send record) of a settlement's transfer: one per attempt."""
    kind = "delivery" if side is Side.BUY else "collection"
    return f"{RESERVED_REQUEST_PREFIX}{kind}:{trade_id}:{attempt}"


@dataclass(frozen=True, slots=True)
class Settlement:
    trade_id: str
    client_id: str
    user_id: str
    side: Side
    #: the asset that moves, and how much of it (smallest units)
    asset_id: int
    units: int
    status: SettlementStatus
    created_at: datetime
    updated_at: datetime
    #: a sell's network fee held beside the coins (USER fee payer), in `fee_asset_id`
    #: (the chain's native coin); 0 when the desk pays it
    fee_units: int = 0
    fee_asset_id: int | None = None
    #: transfers made so far: the current one's key is `transfer_key(side, id, attempt)`
    attempt: int = 0
    #: the current transfer's hash, once signed
    tx_hash: str | None = None
    #: why it waits or failed (an operator's and integrator's message; never a secret)
    reason: str | None = None
    #: when the jobs next look at it (QUEUED, SHORT, SENT, a buy's FAILED); None: not theirs
    due_at: datetime | None = None

    @property
    def request_id(self) -> str | None:
        """The current transfer's send record key (None before the first transfer)."""
        return transfer_key(self.side, self.trade_id, self.attempt) if self.attempt else None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def moved(
        self,
        status: SettlementStatus,
        at: datetime,
        *,
        reason: str | None = None,
        due_at: datetime | None = None,
        tx_hash: str | None = None,
        attempt: int | None = None,
        units: int | None = None,
    ) -> Settlement:
        """This settlement in `status` (its compare-and-set is on status and attempt)."""
        return replace(
            self,
            status=status,
            updated_at=at,
            reason=reason,
            due_at=due_at,
            tx_hash=tx_hash if tx_hash is not None else self.tx_hash,
            attempt=attempt if attempt is not None else self.attempt,
            units=units if units is not None else self.units,
        )


__all__ = [
    "DUE_STATUSES",
    "FINAL_STATUSES",
    "HOLDING_STATUSES",
    "RESERVED_REQUEST_PREFIX",
    "Settlement",
    "SettlementStatus",
    "transfer_key",
]
