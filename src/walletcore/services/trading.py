"""Trading: quote (sell and buy), approve, cancel, get (poll), list.

Rules:
- A quote is `open` for the quote lifetime; after `quote.expiresAt` an unapproved quote reads
  as `expired` (its `completedAt` is the instant it lapsed).
- Approve follows the transition table: the trade is committed as `executing` before the
  venue is called, so a crash or timeout leaves it `executing`, never `open`.
- Another user's trade, or another client's, is a 404 indistinguishable from none.
- A quote's crypto leg, fixed or derived, is within the asset's trade bounds, and neither
  leg is under 0.000001 (`walletcore.domain.trade_limits`; 400 naming the bound). Approve
  does not check them again: the venue re-prices and executes in one call, and its own
  limits refuse an order there (`502 Order rejected: ...`).

Audit (walletcore.services.audit): every transition carries its entry in the write unit of
its compare-and-set, so the log has it if and only if the trade moved:
- `trade.sell` / `trade.order`: the quote stored; `trade.approve` (ok): open -> executing,
  the one approval that goes to the venue; `trade.cancel` (ok): open -> cancelled;
- `trade.settle`: a move the venue decided (executing/approved -> completed, failed or
  approved; executing -> open when it placed nothing), on approve or on a poll;
- `trade.expire`: a lapsed quote stored as expired (by a read, a list, an approve).
An approve or cancel that changed nothing is `replay` (it answered the stored trade) or a
refusal (`409`, ...).

A quote lapsing under many pollers: the readers of one process that find it lapsed share
one expiry write (`SharedExpiries`, walletcore.services.expiries, its rules), and a writer
that loses the compare-and-set costs one conditional UPDATE that matches no row, then one
read.

An approval in the process that made the quote reads nothing first: the service's storage
is wrapped in `RememberedQuotes` (walletcore.services.remembered_quotes, its rules), which
remembers the quotes stored through it, and the approval is decided on the one it answers:
the lapse, the backing check, the executing trade. The compare-and-set open -> executing
tells whether it is still open; when that matches no row (another process approved,
cancelled or expired it), the trade is read and decided as usual. An approval anywhere
else (another worker, after a restart, a forgotten quote) reads it.

Units of work: reads in a read unit; a quote with its entry, and each compare-and-set
with its entry, a write unit of its own (`storage.add_trade`, `storage.swap_trade`: one
statement each on PostgreSQL); never a unit open across a price, venue or network call
(approve: open -> executing, the venue call, the settlement).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Coroutine
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict, TypeVar, Unpack

from walletcore.domain.assets import FIAT_DECIMALS, Asset, parse_fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import (
    DomainError,
    InvalidRequest,
    OrderRejected,
    PriceUnavailable,
    PricingTimeout,
    QuoteLapsed,
    TradeNotApprovable,
    TradeNotFound,
    UserNotFound,
    VenueTimeout,
)
from walletcore.domain.ids import new_id, parse_id
from walletcore.domain.money import keep_places, parse_amount
from walletcore.domain.trade import (
    IN_FLIGHT_STATUSES,
    Accepted,
    ApproveStep,
    Fill,
    FixedLeg,
    Order,
    Quote,
    Rejected,
    Side,
    Trade,
    TradeStatus,
    derive_figures,
    parse_side,
    parse_status,
)
from walletcore.domain.trade_limits import TradeLimits
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, PriceSource, Storage, TradeVenue, UnitOfWork
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.context import Caller
from walletcore.services.event_notes import trade_note
from walletcore.services.expiries import SharedExpiries
from walletcore.services.holdings import Holdings, check_backed
from walletcore.services.remembered_quotes import RememberedQuotes
from walletcore.services.settlements import NothingToCollect, Settlements
from walletcore.services.wallets import given_password

log = logging.getLogger("walletcore.trading")

#: How often a compare-and-set that lost a race is re-read and re-decided.
_MAX_RACE_RETRIES = 3
#: a venue's outcome with figures: a fill or an acceptance (`_kept`)
_OutcomeT = TypeVar("_OutcomeT", Fill, Accepted)


class QuoteBody(TypedDict, total=False):
    """A `/sell` or `/order` body as the binding received it (`X-USER-ID` applied to
    `user_id`): raw values, read by `TradingService.quote` in its order."""

    user_id: Required[JsonValue]
    asset_id: Required[JsonValue]
    fiat: JsonValue
    crypto_amount: JsonValue
    fiat_amount: JsonValue


class TradingService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        prices: PriceSource,
        venue: TradeVenue,
        policy: AssetPolicy,
        auditor: Auditor,
        quote_ttl_seconds: int = 60,
        page_size: int = 10,
        *,
        holdings: Holdings,
        limits: TradeLimits | None = None,
        settlements: Settlements | None = None,
    ) -> None:
        #: the storage, remembering this service's open quotes (module docstring)
        self._storage = (
            storage if isinstance(storage, RememberedQuotes) else RememberedQuotes(storage, clock)
        )
        self._clock = clock
        self._prices = prices
        self._venue = venue
        self._policy = policy
        self._auditor = auditor
        self._holdings = holdings
        #: the crypto leg on chain (walletcore.services.settlements); None: trades are
        #: records of venue orders only (an embedder that settles them itself)
        self._settlements = settlements
        self._limits = limits if limits is not None else TradeLimits(policy.catalog)
        self._quote_ttl = timedelta(seconds=quote_ttl_seconds)
        self._page_size = page_size
        #: the expiry writes of this service, one per lapsed quote (module docstring)
        self._expiries = SharedExpiries(self._store_expiry)

    def _order(self, trade: Trade) -> Order:
        """The venue's order of an approved trade, in its asset's decimals."""
        return trade.order(self._policy.catalog.asset_by_id(trade.asset_id).decimals)

    # -- quotes -------------------------------------------------------------------------
    def sell(self, caller: Caller, **body: Unpack[QuoteBody]) -> Coroutine[Any, Any, Trade]:
        """`/sell` (awaited): an open sell quote. Nothing is sold. The quote's own
        coroutine, not one around it: one fewer for every await inside a quote."""
        return self.quote(caller, Side.SELL, **body)

    def order(self, caller: Caller, **body: Unpack[QuoteBody]) -> Coroutine[Any, Any, Trade]:
        """`/order` (awaited): an open buy quote, the mirror of `/sell`. Nothing is bought."""
        return self.quote(caller, Side.BUY, **body)

    async def quote(
        self,
        caller: Caller,
        side: Side,
        *,
        user_id: JsonValue,
        asset_id: JsonValue,
        fiat: JsonValue = None,
        crypto_amount: JsonValue = None,
        fiat_amount: JsonValue = None,
    ) -> Trade:
        endpoint = "sell" if side is Side.SELL else "order"
        uid = parse_id(user_id, "userId")
        async with self._auditor.record(
            f"trade.{endpoint}", caller.request_id, caller.client_id, user_id=uid
        ) as note:
            asset = self._policy.resolve(caller.client, asset_id, endpoint)
            trade_fiat = parse_fiat(fiat)
            fixed_leg, fixed_amount = _fixed_leg(asset, crypto_amount, fiat_amount)
            held: int | None = None
            if side is Side.SELL:  # reads the user's wallet: 404 no such user
                held = await self._holdings.units(caller.client_id, uid, asset)
            else:
                async with self._storage.read() as unit:
                    await _require_user(unit, caller, uid)
            price = await self._unit_price(asset, trade_fiat)
            figures = derive_figures(fixed_leg, fixed_amount, price, asset.decimals).kept()
            self._limits.check(asset, fixed_leg, figures, trade_fiat)  # both legs, derived
            if held is not None and figures.crypto_amount is not None:
                taken = await self._taken(caller, uid, asset)
                check_backed(held, asset, figures.crypto_amount, taken)
            now = self._clock.now()
            trade = Trade(
                trade_id=new_id(),
                client_id=caller.client_id,
                user_id=uid,
                side=side,
                asset_id=asset.id,
                symbol=asset.symbol,
                fiat=trade_fiat,
                fixed_leg=fixed_leg,
                quote=Quote(
                    figures.crypto_amount, figures.fiat_amount, price, now + self._quote_ttl
                ),
                status=TradeStatus.OPEN,
                created_at=now,
            )
            note.target = trade.trade_id
            entry = note.entry(at=now)
            await self._storage.add_trade(trade, entry)  # remembered for its approval
            note.carried(entry)
            return trade

    # -- approve ------------------------------------------------------------------------
    async def approve(
        self,
        caller: Caller,
        *,
        user_id: JsonValue,
        trade_id: JsonValue,
        password: JsonValue = None,
    ) -> Trade:
        """`/trade/approve`: price again holding the fixed leg, and execute. With
        settlements, a sell's coins are held first and collected when it completes and
        `password` was given (walletcore.services.settlements); a buy is delivered."""
        uid, tid = parse_id(user_id, "userId"), parse_id(trade_id, "tradeId")
        async with self._auditor.record(
            "trade.approve", caller.request_id, caller.client_id, user_id=uid, target=tid
        ) as note:
            # malformed is a 400 whatever the trade's state
            secret = None if password is None else given_password(password)
            remembered = self._storage.open_quote(caller.client_id, uid, tid)
            for _ in range(_MAX_RACE_RETRIES):
                if remembered is not None:  # this process's quote: no read (module docstring)
                    trade, remembered = remembered, None
                else:
                    trade = await self._load(caller, uid, tid, expire=False)
                now = self._clock.now()
                step = trade.approve_step(now)  # raises the 409 rows
                if step is ApproveStep.REPLAY:
                    return await self._settled(caller, trade)  # `replay`: nothing changed
                if step is ApproveStep.EXPIRE:
                    if trade.status is TradeStatus.APPROVED:
                        # The row is "approved, never settled": stop the order the venue is
                        # still working, so an order it filled meanwhile (or filled in part
                        # before it stopped) is recorded, not expired.
                        stopped = await self._stop(caller, trade)
                        if stopped.status is not TradeStatus.APPROVED:
                            continue
                        expired = trade.expire(now)
                        entry = self._move_entry(caller, trade, expired, "trade.expire")
                        if await self._storage.swap_trade(trade.status, expired, entry):
                            raise QuoteLapsed()
                        continue
                    if (await self._expiries.expire(caller, trade)).status is TradeStatus.EXPIRED:
                        raise QuoteLapsed()
                    continue
                asset = self._policy.resolve(caller.client, trade.asset_id, "trade/approve")
                held = None
                if trade.side is Side.SELL and trade.quote.crypto_amount is not None:
                    held = await self._holdings.units(caller.client_id, uid, asset)
                    if self._settlements is None:  # else the hold checks it, under a lock
                        check_backed(held, asset, trade.quote.crypto_amount)
                reserved = None
                if self._settlements is not None:
                    await self._settlements.check_password(caller, trade, secret)
                    reserved = await self._settlements.reserve(caller, trade, held)
                executing = trade.start_approval(now)
                if await self._approve(note, executing):
                    if self._settlements is None:
                        return await self._execute(caller, executing)
                    try:
                        done = await self._execute(caller, executing)
                    except (OrderRejected, PriceUnavailable) as exc:
                        # nothing traded: the hold goes at once, not on the jobs' next run
                        stored = await self._load(caller, uid, tid, expire=False)
                        reopened = isinstance(exc, PriceUnavailable)
                        await self._settlements.follow(caller, stored, reopened=reopened)
                        raise
                    return await self._settlements.follow(caller, done, secret, known=reserved)
            raise TradeNotApprovable("The trade changed while it was being approved; poll /trade")

    async def _approve(self, note: AuditNote, executing: Trade) -> bool:
        """open -> executing with the `trade.approve` entry: the one approval that wins.
        Either way the quote is no longer this process's to approve unread (the storage
        forgets it: walletcore.services.remembered_quotes)."""
        entry = note.entry(at=executing.approved_at, event=trade_note(TradeStatus.OPEN, executing))
        if not await self._storage.swap_trade(TradeStatus.OPEN, executing, entry):
            return False
        note.carried(entry)
        return True

    async def _execute(self, caller: Caller, trade: Trade) -> Trade:
        try:
            outcome = await self._venue.execute(self._order(trade))
        except OrderRejected as exc:
            await self._move(caller, trade, trade.fail(exc.reason, self._clock.now()))
            raise
        except PriceUnavailable:
            # The venue placed nothing: the quote is open again and approve may be retried.
            await self._move(caller, trade, trade.reopen())
            raise
        except (VenueTimeout, PricingTimeout):
            raise VenueTimeout() from None
        except DomainError:
            raise
        except Exception:
            # Anything else from the venue leaves the outcome unknown: stay executing.
            log.exception("venue call failed for trade %s; it stays executing", trade.trade_id)
            raise VenueTimeout() from None
        return await self._apply(caller, trade, outcome)

    async def _apply(
        self, caller: Caller, trade: Trade, outcome: Fill | Accepted | Rejected | object
    ) -> Trade:
        now = self._clock.now()
        if isinstance(outcome, Fill):
            return await self._move(caller, trade, trade.settle(_kept(outcome), now), at=now)
        if isinstance(outcome, Accepted) and trade.status is TradeStatus.EXECUTING:
            return await self._move(caller, trade, trade.accept(_kept(outcome)), at=now)
        if isinstance(outcome, Rejected):
            return await self._move(caller, trade, trade.fail(outcome.reason, now), at=now)
        return trade

    async def _move(
        self,
        caller: Caller,
        current: Trade,
        new: Trade,
        action: str = "trade.settle",
        *,
        at: datetime | None = None,
    ) -> Trade:
        """Store `new` (with its audit entry, at `at` when the move's instant was read
        already) if `current` is still stored; else return what is stored now (read after
        the compare-and-set lost)."""
        entry = self._move_entry(caller, current, new, action, at)
        if await self._storage.swap_trade(current.status, new, entry):
            return new
        async with self._storage.read() as unit:
            stored = await unit.trades.get(current.client_id, current.user_id, current.trade_id)
        return stored if stored is not None else current

    async def _swap(
        self, unit: UnitOfWork, caller: Caller, current: Trade, new: Trade, action: str
    ) -> bool:
        """The compare-and-set `current.status` -> `new` in `unit`, with the entry of the
        move when it applied."""
        entry = self._move_entry(caller, current, new, action)
        return await unit.trades.swap(current.status, new, entry=entry)

    def _move_entry(
        self, caller: Caller, current: Trade, new: Trade, action: str, at: datetime | None = None
    ) -> AuditEntry:
        move = f"{current.status._value_} -> {new.status._value_}"
        if new.failure_reason and new.status is TradeStatus.FAILED:
            move = f"{move}: {new.failure_reason}"
        return self._auditor.entry(
            action,
            caller.request_id,
            caller.client_id,
            user_id=new.user_id,
            target=new.trade_id,
            detail=move,
            at=at,
            event=trade_note(current.status, new),
        )

    async def _store_expiry(self, caller: Caller, trade: Trade) -> Trade:
        """Store the lapsed open quote `trade` as expired; the trade as stored after (each
        is one write in this process, whoever reads it: `self._expiries`)."""
        return await self._move(
            caller, trade, trade.expire(self._clock.now()), action="trade.expire"
        )

    # -- cancel, get, list --------------------------------------------------------------
    async def cancel(self, caller: Caller, *, user_id: JsonValue, trade_id: JsonValue) -> Trade:
        """`/trade/cancel`: open -> cancelled; cancelled again is returned unchanged."""
        uid, tid = parse_id(user_id, "userId"), parse_id(trade_id, "tradeId")
        async with self._auditor.record(
            "trade.cancel", caller.request_id, caller.client_id, user_id=uid, target=tid
        ) as note:
            for _ in range(_MAX_RACE_RETRIES):
                trade = await self._load(caller, uid, tid)
                cancelled = trade.cancel(self._clock.now())  # raises 409 unless open/cancelled
                if cancelled is trade:
                    return cancelled  # cancelled already: audited as `replay`
                entry = note.entry(event=trade_note(trade.status, cancelled))
                if await self._storage.swap_trade(trade.status, cancelled, entry):
                    note.carried(entry)
                    return cancelled
            raise TradeNotFound()  # pragma: no cover - needs three lost races in a row

    async def get(self, caller: Caller, *, user_id: JsonValue, trade_id: JsonValue) -> Trade:
        """`/trade`: the trade; an `approved` or `executing` one is first asked of the venue."""
        uid, tid = parse_id(user_id, "userId"), parse_id(trade_id, "tradeId")
        trade = await self._load(caller, uid, tid)
        if trade.status in IN_FLIGHT_STATUSES:
            trade = await self._poll(caller, trade)
        return await self._settled(caller, trade)

    async def collect(
        self, caller: Caller, *, user_id: JsonValue, trade_id: JsonValue, password: JsonValue
    ) -> Trade:
        """`/trade/collect`: a completed sell's coins moved to the desk with the wallet
        password (walletcore.services.settlements)."""
        uid, tid = parse_id(user_id, "userId"), parse_id(trade_id, "tradeId")
        async with self._auditor.record(
            "trade.collect", caller.request_id, caller.client_id, user_id=uid, target=tid
        ) as note:
            secret = given_password(password)
            trade = await self._load(caller, uid, tid)
            if self._settlements is None:
                raise InvalidRequest("This service does not move the coins of trades")
            if trade.side is not Side.SELL:  # a buy is delivered: nothing to collect (409)
                raise NothingToCollect()
            if trade.status in IN_FLIGHT_STATUSES:
                trade = await self._poll(caller, trade)
            await self._settlements.check_password(caller, trade, secret)
            collected = await self._settlements.collect(caller, trade, secret, note)
            note.target = tid
            return collected

    async def _taken(self, caller: Caller, user_id: str, asset: Asset) -> int:
        """What of the wallet's `asset` its sells hold and its sends in flight spend (0
        when trades move no coins)."""
        if self._settlements is None:
            return 0
        return await self._settlements.taken(caller.client_id, user_id, asset.id)

    async def _settled(self, caller: Caller, trade: Trade) -> Trade:
        """The trade with its settlement carried on as far as it goes now (a job's work
        done on the request that sees it first), when trades move coins."""
        if self._settlements is None:
            return trade
        return await self._settlements.follow(caller, trade)

    async def settle(self, trade: Trade, *, request_id: str) -> Trade:
        """What `/trade` does for an in-flight trade, with no client polling: ask the venue
        and record what it says (the settlement job, walletcore.jobs.trades). The move
        carries `trade.settle` under `request_id` (the job run's id); the trade as stored
        after, or unchanged when the venue cannot be asked or its client is gone."""
        if trade.status not in IN_FLIGHT_STATUSES:
            return trade
        async with self._storage.read() as unit:
            client = await unit.clients.get(trade.client_id)
        if client is None:  # pragma: no cover - trades outlive no client
            return trade
        caller = Caller(client, request_id)
        after = await self._poll(caller, trade)
        if after.status is trade.status:
            return after  # nothing moved: its settlement has nothing new to do either
        return await self._settled(caller, after)

    async def _poll(self, caller: Caller, trade: Trade) -> Trade:
        """Ask the venue about an in-flight trade and record what it says."""
        try:
            outcome = await self._venue.status(self._order(trade))
        except Exception:  # noqa: BLE001 - an unreachable venue: show the trade as stored
            log.warning("venue status unavailable for trade %s", trade.trade_id)
            return trade
        return await self._apply(caller, trade, outcome)  # a move carries `trade.settle`

    async def _stop(self, caller: Caller, trade: Trade) -> Trade:
        """Cancel the working order of an approved trade whose quote lapsed; the trade as
        stored after. `approved` means nothing traded and nothing will: expire it."""
        try:
            outcome = await self._venue.cancel(self._order(trade))
        except Exception:  # noqa: BLE001 - the venue cannot be asked: nothing is decided
            log.warning("venue cancel unavailable for trade %s", trade.trade_id)
            raise VenueTimeout() from None
        if isinstance(outcome, Rejected):  # stopped with nothing traded
            return trade
        if isinstance(outcome, Accepted):  # still working: it cannot expire yet
            raise TradeNotApprovable(
                "The order is still being worked; poll /trade until it settles"
            )
        return await self._apply(caller, trade, outcome)

    async def list(
        self,
        caller: Caller,
        *,
        user_id: JsonValue,
        side: JsonValue = None,
        status: JsonValue = None,
    ) -> list[Trade]:
        """`/trades`: the user's trades, newest first, one page, optionally filtered.

        Lapsed open quotes are stored as expired first; finding none (the usual case) costs
        no write, and the page comes from the same read unit: unfiltered, one statement
        (the page itself shows whether a quote on it lapsed); filtered by status, the
        lapsed quotes are looked for first (an `open` page must not show one, an `expired`
        page must). Only an empty page checks that the user exists (a trade is always
        some user's).
        """
        trades = await self._page(caller, user_id=user_id, side=side, status=status)
        if self._settlements is None:
            return trades
        return await self._settlements.attach_all(caller.client_id, trades)

    async def _page(
        self,
        caller: Caller,
        *,
        user_id: JsonValue,
        side: JsonValue = None,
        status: JsonValue = None,
    ) -> builtins.list[Trade]:
        uid = parse_id(user_id, "userId")
        page: dict[str, Any] = {
            "side": parse_side(side),
            "status": parse_status(status),
            "limit": self._page_size,
        }
        now = self._clock.now()
        async with self._storage.read() as unit:
            if page["status"] is None:
                # Unfiltered: the page alone shows whether a quote on it lapsed; one lapsed
                # elsewhere changes nothing shown (it expires when next read or listed).
                found = await unit.trades.page(caller.client_id, uid, **page)
                if not any(t.lapses_unapproved(now) for t in found):
                    if not found:  # a user with trades exists; only an empty page asks
                        await _require_user(unit, caller, uid)
                    return found
            lapsed = await unit.trades.lapsed(caller.client_id, uid, now)
            if not lapsed:
                found = await unit.trades.page(caller.client_id, uid, **page)
                if not found:  # a user with trades exists; only an empty page asks
                    await _require_user(unit, caller, uid)
                return found
        async with self._storage.write() as unit:
            for trade in lapsed:  # one conditional UPDATE each: a quote expired meanwhile
                await self._swap(unit, caller, trade, trade.expire(now), "trade.expire")
        async with self._storage.read() as unit:
            return await unit.trades.page(caller.client_id, uid, **page)

    # -- helpers --------------------------------------------------------------------------
    async def _load(
        self, caller: Caller, user_id: str, trade_id: str, *, expire: bool = True
    ) -> Trade:
        async with self._storage.read() as unit:
            trade = await unit.trades.get(caller.client_id, user_id, trade_id)
        if trade is None:
            raise TradeNotFound()
        if expire and trade.lapses_unapproved(self._clock.now()):
            trade = await self._expiries.expire(caller, trade)
        return trade

    async def _unit_price(self, asset: Asset, fiat: Any) -> Any:
        """The quote's unit price, to the places every store keeps (`keep_places`)."""
        price = keep_places(await self._prices.unit_price(asset.symbol, fiat))
        if price <= 0:
            raise PriceUnavailable()
        return price


def _kept(outcome: _OutcomeT) -> _OutcomeT:
    """A venue's fill or acceptance with its figures to the places every store keeps
    (`Figures.kept`); the very outcome when they have no more (no `replace`)."""
    kept = outcome.figures.kept()
    return outcome if kept is outcome.figures else replace(outcome, figures=kept)


async def _require_user(unit: UnitOfWork, caller: Caller, user_id: str) -> None:
    if await unit.wallets.get_user(caller.client_id, user_id) is None:
        raise UserNotFound()


def _fixed_leg(
    asset: Asset, crypto_amount: JsonValue, fiat_amount: JsonValue
) -> tuple[FixedLeg, Any]:
    if (crypto_amount is None) == (fiat_amount is None):
        raise InvalidRequest("Exactly one of cryptoAmount and fiatAmount is required")
    if crypto_amount is not None:
        return FixedLeg.CRYPTO, parse_amount(crypto_amount, asset.decimals, "cryptoAmount")
    return FixedLeg.FIAT, parse_amount(fiat_amount, FIAT_DECIMALS, "fiatAmount")
