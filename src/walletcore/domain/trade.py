"""The Trade entity and its state machine: every row of the spec's transition table.

A `Trade` is immutable; each transition returns a new one. The service persists it with a
compare-and-set on the status it started from, so concurrent approvals cannot both win.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_DOWN, Context, Decimal
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import (
    InvalidRequest,
    QuoteLapsed,
    ServerError,
    TradeNotApprovable,
    TradeNotCancellable,
)
from walletcore.domain.money import keep_places
from walletcore.domain.wire import JsonValue

if TYPE_CHECKING:
    from walletcore.domain.settlement import Settlement


class Side(StrEnum):
    BUY = "buy"
    SELL = "sell"


class TradeStatus(StrEnum):
    OPEN = "open"
    APPROVED = "approved"
    EXECUTING = "executing"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {TradeStatus.COMPLETED, TradeStatus.FAILED, TradeStatus.EXPIRED, TradeStatus.CANCELLED}
)
#: Statuses in which an order may be live at the venue: `/trade` asks the venue about them.
IN_FLIGHT_STATUSES = frozenset({TradeStatus.APPROVED, TradeStatus.EXECUTING})
#: The arithmetic of derived figures: 80 digits, wider than any amount times any price.
_EXACT = Context(prec=80)


class FixedLeg(StrEnum):
    """Which amount the quote was asked for; approval holds it and moves the other."""

    CRYPTO = "crypto"
    FIAT = "fiat"


def parse_side(value: JsonValue) -> Side | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return Side(value)
        except ValueError:
            pass
    raise InvalidRequest("side must be one of buy, sell")


def parse_status(value: JsonValue) -> TradeStatus | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return TradeStatus(value)
        except ValueError:
            pass
    allowed = ", ".join(s.value for s in TradeStatus)
    raise InvalidRequest(f"status must be one of {allowed}")


class InvalidTransition(ServerError):
    """A transition asked of a trade in a status the table does not allow it from (a bug)."""

    default_message = "Internal error"


@dataclass(frozen=True, slots=True)
class Figures:
    """Amounts and unit price of a trade at one stage (quoted, approved, executed)."""

    crypto_amount: Decimal | None
    fiat_amount: Decimal | None
    price: Decimal

    def kept(self) -> Figures:
        """These figures to the places every store keeps (`keep_places`): a trade built
        from them is, value for value, the trade a store gives back. These very figures
        when none has more places (the usual case: then nothing is built, and a venue's
        outcome that holds them is kept as it is)."""
        crypto, fiat, price = self.crypto_amount, self.fiat_amount, self.price
        kept_crypto = None if crypto is None else keep_places(crypto)
        kept_fiat = None if fiat is None else keep_places(fiat)
        kept_price = keep_places(price)
        if kept_crypto is crypto and kept_fiat is fiat and kept_price is price:
            return self
        return Figures(kept_crypto, kept_fiat, kept_price)


@dataclass(frozen=True, slots=True)
class Quote:
    crypto_amount: Decimal | None
    fiat_amount: Decimal | None
    price: Decimal
    expires_at: datetime

    @property
    def figures(self) -> Figures:
        return Figures(self.crypto_amount, self.fiat_amount, self.price)


@dataclass(frozen=True, slots=True)
class Order:
    """What a venue is asked to execute: the fixed leg is held, the other leg is derived."""

    trade_id: str
    side: Side
    asset_id: int
    symbol: str
    decimals: int
    fiat: Fiat
    fixed_leg: FixedLeg
    fixed_amount: Decimal
    approved_at: datetime
    #: The quote's unit price in `fiat`: a venue refuses a re-price too far from it
    #: (`walletcore.pricing.check_slippage`).
    quoted_price: Decimal | None = None
    #: When the quote lapses: a venue may let an order it is still working run until then.
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Fill:
    """An executed order."""

    figures: Figures
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """An order the venue took and is still working: settle it on a later poll."""

    figures: Figures
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """An order the venue refused; nothing traded."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """The venue cannot say yet (no answer, or the order is not visible yet)."""


OrderOutcome = Fill | Accepted | Rejected | Unknown


class ApproveStep(Enum):
    """What an approve call does to a trade, from the transition table."""

    PROCEED = "proceed"  # open, quote live: price again and execute
    REPLAY = "replay"  # completed: 200 with the original result, nothing trades again
    EXPIRE = "expire"  # quote lapsed on an open or approved trade: expired, then 409


#: The fields a move of a trade can change (`start_approval`, `settle`, `accept`, `fail`,
#: `reopen`, `expire`, `cancel`). The others (its ids, side, asset, fiat, fixed leg, quote
#: and creation instant) are the quote's: written once when it is stored, never moved.
MOVED_FIELDS = (
    "status",
    "approved_at",
    "completed_at",
    "approved",
    "executed",
    "reference",
    "failure_reason",
)


#: "Left as it is" for `Trade._to` (None is a value a move may set).
_SAME: Any = object()


def moved(stored: Trade, move: Trade) -> Trade:
    """`stored` with what `move` changed of it (`MOVED_FIELDS`): what a store keeps when it
    swaps `move` in (`TradeStore.swap`), whatever the rest of `move` says."""
    return replace(stored, **{name: getattr(move, name) for name in MOVED_FIELDS})


@dataclass(frozen=True, slots=True)
class Trade:
    trade_id: str
    client_id: str
    user_id: str
    side: Side
    asset_id: int
    symbol: str
    fiat: Fiat
    fixed_leg: FixedLeg
    quote: Quote
    status: TradeStatus
    created_at: datetime
    approved_at: datetime | None = None
    completed_at: datetime | None = None
    approved: Figures | None = None
    executed: Figures | None = None
    reference: str | None = None
    failure_reason: str | None = None
    #: the crypto leg on chain, when the service read it with the trade (never stored
    #: with the trade: walletcore.domain.settlement)
    settlement: Settlement | None = field(default=None, compare=False)

    # -- reading ---------------------------------------------------------------------
    @property
    def figures(self) -> Figures:
        """Best-known figures: executed, else approved, else quoted (spec rule 1)."""
        return self.executed or self.approved or self.quote.figures

    @property
    def fixed_amount(self) -> Decimal:
        value = (
            self.quote.crypto_amount
            if self.fixed_leg is FixedLeg.CRYPTO
            else self.quote.fiat_amount
        )
        if value is None:  # a quote always records its fixed leg
            raise InvalidTransition()
        return value

    def is_lapsed(self, now: datetime) -> bool:
        return now >= self.quote.expires_at

    def lapses_unapproved(self, now: datetime) -> bool:
        """An open quote whose lifetime ran out: it reads as `expired` from then on."""
        return self.status is TradeStatus.OPEN and self.is_lapsed(now)

    def order(self, decimals: int) -> Order:
        """The venue's order of an approved trade; `decimals`: its asset's (the caller
        looks the asset up in its catalog)."""
        if self.approved_at is None:
            raise InvalidTransition()
        return Order(
            trade_id=self.trade_id,
            side=self.side,
            asset_id=self.asset_id,
            symbol=self.symbol,
            decimals=decimals,
            fiat=self.fiat,
            fixed_leg=self.fixed_leg,
            fixed_amount=self.fixed_amount,
            approved_at=self.approved_at,
            quoted_price=self.quote.price,
            expires_at=self.quote.expires_at,
        )

    # -- the transition table --------------------------------------------------------
    def approve_step(self, now: datetime) -> ApproveStep:
        """Which row of the table an approve call hits; raises the 409 rows."""
        status = self.status
        if status is TradeStatus.COMPLETED:
            return ApproveStep.REPLAY
        if status in (TradeStatus.OPEN, TradeStatus.APPROVED) and self.is_lapsed(now):
            return ApproveStep.EXPIRE
        if status is TradeStatus.OPEN:
            return ApproveStep.PROCEED
        if status is TradeStatus.APPROVED:
            raise TradeNotApprovable("Trade is already approved and being worked; poll /trade")
        if status is TradeStatus.EXECUTING:
            raise TradeNotApprovable("Trade is executing; poll /trade and never approve it again")
        raise TradeNotApprovable(f"Trade is {status.value}; request a new quote")

    def start_approval(self, now: datetime) -> Trade:
        """open -> executing: committed before the venue is called."""
        self._require(TradeStatus.OPEN)
        if self.is_lapsed(now):
            raise QuoteLapsed()
        return self._to(TradeStatus.EXECUTING, approved_at=now)

    def settle(self, fill: Fill, now: datetime) -> Trade:
        """executing/approved -> completed with the executed figures."""
        self._require(TradeStatus.EXECUTING, TradeStatus.APPROVED)
        return self._to(
            TradeStatus.COMPLETED,
            approved=self.approved or fill.figures,
            executed=fill.figures,
            completed_at=now,
            reference=fill.reference or self.reference,
        )

    def accept(self, accepted: Accepted) -> Trade:
        """executing -> approved: the venue took the order and is working it."""
        self._require(TradeStatus.EXECUTING)
        return self._to(
            TradeStatus.APPROVED,
            approved=accepted.figures,
            reference=accepted.reference or self.reference,
        )

    def fail(self, reason: str, now: datetime) -> Trade:
        """executing/approved -> failed: the venue rejected the order, nothing traded."""
        self._require(TradeStatus.EXECUTING, TradeStatus.APPROVED)
        return self._to(TradeStatus.FAILED, failure_reason=reason, completed_at=now)

    def reopen(self) -> Trade:
        """executing -> open: only when the venue placed nothing (no usable price)."""
        self._require(TradeStatus.EXECUTING)
        return self._to(TradeStatus.OPEN, approved_at=None)

    def expire(self, now: datetime) -> Trade:
        """open/approved -> expired. An unapproved quote expires at the instant it lapsed."""
        self._require(TradeStatus.OPEN, TradeStatus.APPROVED)
        when = self.quote.expires_at if self.status is TradeStatus.OPEN else now
        return self._to(TradeStatus.EXPIRED, completed_at=when)

    def cancel(self, now: datetime) -> Trade:
        """open -> cancelled. A cancelled trade cancels again as itself (idempotent)."""
        if self.status is TradeStatus.CANCELLED:
            return self
        if self.status is not TradeStatus.OPEN:
            raise TradeNotCancellable(
                f"Only an open quote can be cancelled; this trade is {self.status.value}"
            )
        return self._to(TradeStatus.CANCELLED, completed_at=now)

    def _to(
        self,
        status: TradeStatus,
        *,
        approved_at: datetime | None = _SAME,
        completed_at: datetime | None = _SAME,
        approved: Figures | None = _SAME,
        executed: Figures | None = _SAME,
        reference: str | None = _SAME,
        failure_reason: str | None = _SAME,
    ) -> Trade:
        """This trade moved to `status`, with the `MOVED_FIELDS` given changed and every
        other field its own: what `dataclasses.replace` makes, built directly (replace
        looks up and reads every field by name: twice the cost, twice a sell and its
        approval; docs/performance.md, "Fewer Python calls per request")."""
        return Trade(
            self.trade_id,
            self.client_id,
            self.user_id,
            self.side,
            self.asset_id,
            self.symbol,
            self.fiat,
            self.fixed_leg,
            self.quote,
            status,
            self.created_at,
            self.approved_at if approved_at is _SAME else approved_at,
            self.completed_at if completed_at is _SAME else completed_at,
            self.approved if approved is _SAME else approved,
            self.executed if executed is _SAME else executed,
            self.reference if reference is _SAME else reference,
            self.failure_reason if failure_reason is _SAME else failure_reason,
            self.settlement,
        )

    def _require(self, *allowed: TradeStatus) -> None:
        if self.status not in allowed:
            raise InvalidTransition()


def derive_figures(
    fixed_leg: FixedLeg, fixed_amount: Decimal, price: Decimal, decimals: int
) -> Figures:
    """Hold the fixed leg at `price` and derive the other one.

    A derived crypto amount is cut to the asset's decimals (it must be sendable); a derived
    fiat amount keeps full precision and is cut only on output. Both are worked out to 80
    digits (`_EXACT`, passed explicitly: a `localcontext()` per quote cost more than the
    arithmetic).
    """
    if fixed_leg is FixedLeg.CRYPTO:
        return Figures(fixed_amount, _EXACT.multiply(fixed_amount, price), price)
    crypto = _EXACT.divide(fixed_amount, price).quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_DOWN, context=_EXACT
    )
    return Figures(crypto, fixed_amount, price)
