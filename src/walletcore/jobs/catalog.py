"""The deployment's background jobs, bound to its adapters: what an engine runs.

- `refresh_prices`: one fetch from the configured upstream price source (`fetch_table`),
  its usable prices saved to the shared table (`unit.prices`), which every process serves
  (`walletcore.pricing.SharedPriceSource`). A run that finds the table refreshed less than
  half an interval ago skips the fetch: a second engine, or a retried run, costs one read.
- `settle_trades`: every approved and executing trade (oldest first, a batch per run)
  asked of the venue through `TradingService.settle`, as `/trade` does when a client
  polls. Each move is a compare-and-set with its `trade.settle` entry, so a trade moves
  once however many runs ask about it.
- `follow_sends`: every send not final on chain (`pending`, `stuck`, `dropped`; a batch,
  the least recently checked first) followed by `Transfers.follow`
  (walletcore.services.transfers, docs/transfers.md): asked of its chain, settled,
  bumped, re-broadcast, re-filled or re-signed. Every move is a compare-and-set on the
  transfer's current hash (`sends.track`) with its audit entry in the same unit, so a
  send moves once however many runs ask. Unchanged, or a node error: put behind the
  others for the next run (`sends.checked_chain`).

- `settle_coins`: every settlement due (walletcore.services.settlements) carried on: a
  buy's delivery made, or tried again when the desk was short; a sent transfer looked up
  (`settled` / `failed` once the follow job has its outcome); a `reserved` one whose trade
  ended moved on (the recovery of a process killed between a fill and its transfer).
  Every move is a compare-and-set with its entry and event.

- `reconcile_desk`: every api client's desk accounted (walletcore.services.desk): its
  balance on chain against the deliveries it owes, each wallet's balance against what its
  sells hold; every difference logged, an entry when a client's differences changed, an
  asset's deliveries paused when a shortfall exceeds its tolerance; the figures told to
  the observer (`desk_account`).

- `deliver_webhooks`: every due webhook endpoint leased to the run and its events posted
  in feed order (walletcore.services.webhooks): a 2xx moves its cursor, a failure
  schedules the next attempt, each by compare-and-set, so two runs never post to one
  endpoint at once. `prune_webhook_deliveries`: the delivery log kept as long as the feed.

- `expire_approvals`: the held transfers whose approval ran out of time ended: `expired`,
  their velocity counts given back, `send.rejected` on the feed. `prune_policy_usage`:
  the withdrawal policies' velocity counts older than the longest window a policy may
  name, deleted (walletcore.services.policies).

Errors leave the run (an engine retries it); nothing here loops or sleeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, Protocol

from walletcore.domain.errors import PriceUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.sends import SendRecord
from walletcore.ports import Clock, Observer, Storage
from walletcore.pricing import PriceTable, usable_prices
from walletcore.services.deposits import DepositWatch
from walletcore.services.desk import DeskAccounts
from walletcore.services.events import EventFeed
from walletcore.services.policies import Policies
from walletcore.services.settlements import Settlements
from walletcore.services.trading import TradingService
from walletcore.services.transfers import Followed, Transfers
from walletcore.services.webhooks import Webhooks

log = logging.getLogger("walletcore.jobs")

#: Venue calls one settlement run makes at once.
SETTLE_CONCURRENCY = 8
#: Node lookups one follow run makes at once.
FOLLOW_CONCURRENCY = 8


class PriceFeed(Protocol):
    """An upstream price source the refresh job can fetch from (`RefreshingPriceSource`)."""

    async def fetch_table(self) -> PriceTable: ...


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    name: str
    every_seconds: float
    run: Callable[[], Awaitable[object]]


class Jobs:
    """The job functions over the container's adapters. `feed`, `trading` and `transfers`
    are called on first use, so a process that never runs a job never builds the upstream
    feed."""

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        feed: Callable[[], Any],
        trading: Callable[[], TradingService],
        refresh_seconds: float,
        settle_seconds: float,
        settle_batch: int,
        transfers: Callable[[], Transfers] | None = None,
        follow_seconds: float = 15.0,
        follow_batch: int = 200,
        observer: Observer | None = None,
        deposits: Callable[[], DepositWatch] | None = None,
        deposits_seconds: float = 10.0,
        events: Callable[[], EventFeed] | None = None,
        prune_seconds: float = 3600.0,
        webhooks: Callable[[], Webhooks] | None = None,
        webhook_seconds: float = 2.0,
        settlements: Callable[[], Settlements | None] | None = None,
        settlement_seconds: float = 5.0,
        desk: Callable[[], DeskAccounts | None] | None = None,
        reconcile_seconds: float = 300.0,
        policies: Callable[[], Policies] | None = None,
        approvals_seconds: float = 60.0,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._feed = feed
        self._trading = trading
        self.refresh_seconds = refresh_seconds
        self.settle_seconds = settle_seconds
        self._settle_batch = settle_batch
        self._transfers = transfers
        self.follow_seconds = follow_seconds
        self._follow_batch = follow_batch
        self.observer = observer or Observer()
        self._built_feed: Any = None
        self._deposits = deposits
        self.deposits_seconds = deposits_seconds
        self._events = events
        self.prune_seconds = prune_seconds
        self._webhooks = webhooks
        self._built_webhooks: Webhooks | None = None
        self.webhook_seconds = webhook_seconds
        self._settlements = settlements
        self.settlement_seconds = settlement_seconds
        self._desk = desk
        self.reconcile_seconds = reconcile_seconds
        self._policies = policies
        self.approvals_seconds = approvals_seconds

    async def aclose(self) -> None:
        """Close the upstream feed if a refresh built it (its HTTP client, say), and the
        webhook sender if a delivery built it."""
        feed, self._built_feed = self._built_feed, None
        close = getattr(feed, "aclose", None)
        if close is not None:
            await close()
        webhooks, self._built_webhooks = self._built_webhooks, None
        if webhooks is not None:
            await webhooks.aclose()

    def periodic(self) -> list[PeriodicJob]:
        return [
            PeriodicJob("refresh_prices", self.refresh_seconds, self.refresh_prices),
            PeriodicJob("settle_trades", self.settle_seconds, self.settle_trades),
            *(
                [PeriodicJob("follow_sends", self.follow_seconds, self.follow_sends)]
                if self._transfers is not None
                else []
            ),
            *(
                [PeriodicJob("settle_coins", self.settlement_seconds, self.settle_coins)]
                if self._settlements is not None
                else []
            ),
            *(
                [PeriodicJob("reconcile_desk", self.reconcile_seconds, self.reconcile_desk)]
                if self._desk is not None
                else []
            ),
            *(
                [PeriodicJob("scan_deposits", self.deposits_seconds, self.scan_deposits)]
                if self._deposits is not None
                else []
            ),
            *(
                [PeriodicJob("prune_events", self.prune_seconds, self.prune_events)]
                if self._events is not None
                else []
            ),
            *(
                [
                    PeriodicJob("deliver_webhooks", self.webhook_seconds, self.deliver_webhooks),
                    PeriodicJob(
                        "prune_webhook_deliveries",
                        self.prune_seconds,
                        self.prune_webhook_deliveries,
                    ),
                ]
                if self._webhooks is not None
                else []
            ),
            *(
                [
                    PeriodicJob("expire_approvals", self.approvals_seconds, self.expire_approvals),
                    PeriodicJob("prune_policy_usage", self.prune_seconds, self.prune_policy_usage),
                ]
                if self._policies is not None
                else []
            ),
        ]

    async def refresh_prices(self) -> bool:
        """Fetch and save the price table; False when it was fresh already (skipped)."""
        async with self._storage.read() as unit:
            stored = await unit.prices.load()
        newest = max((at for _, at in stored.values()), default=None)
        fresh = timedelta(seconds=self.refresh_seconds / 2)
        if newest is not None and self._clock.now() - newest < fresh:
            return False
        feed = self._built_feed = self._feed()
        fetch = getattr(feed, "fetch_table", None)
        if fetch is None:
            raise TypeError(
                f"the price source {type(feed).__name__} has no fetch_table(); the shared "
                "price refresh needs one (walletcore.pricing.RefreshingPriceSource has it)"
            )
        table = usable_prices(await fetch())
        if not table:
            raise PriceUnavailable("the upstream price source answered no usable price")
        async with self._storage.write() as unit:
            await unit.prices.save(table, self._clock.now())
        log.info("prices refreshed: %d pairs", len(table))
        return True

    async def settle_trades(self) -> int:
        """Ask the venue about the trades in flight; how many moved."""
        async with self._storage.read() as unit:
            in_flight = await unit.trades.in_flight(self._settle_batch)
        if not in_flight:
            return 0
        trading = self._trading()
        request_id = f"job-settle-{new_id()}"
        gate = asyncio.Semaphore(SETTLE_CONCURRENCY)

        async def settle(trade: Any) -> bool:
            async with gate:
                after = await trading.settle(trade, request_id=request_id)
            return after.status is not trade.status

        moved = sum(await asyncio.gather(*(settle(t) for t in in_flight)))
        log.info("settlement: %d of %d trades in flight moved", moved, len(in_flight))
        return moved

    async def follow_sends(self) -> int:
        """Ask the chains about the sends pending on them; how many became final.

        Tells the observer how many of the batch are still pending (`sends_pending`)."""
        async with self._storage.read() as unit:
            followed = await unit.sends.following(self._follow_batch)
        if not followed:
            self.observer.sends_pending(0)
            return 0
        if self._transfers is None:
            raise RuntimeError("follow_sends needs the transfer lifecycle (Jobs(transfers=))")
        transfers = self._transfers()
        request_id = f"job-follow-{new_id()}"
        gate = asyncio.Semaphore(FOLLOW_CONCURRENCY)

        async def follow(record: SendRecord) -> Followed:
            async with gate:
                try:
                    return await transfers.follow(record, request_id)
                except Exception as exc:  # noqa: BLE001 - a node or store error: next run
                    log.warning(
                        "send %s/%s: following failed (%s); asked again later",
                        record.client_id,
                        record.request_id,
                        type(exc).__name__,
                    )
                    return Followed.PENDING

        outcomes = await asyncio.gather(*(follow(r) for r in followed))
        asked = [
            (r.client_id, r.request_id)
            for r, outcome in zip(followed, outcomes, strict=True)
            if outcome is Followed.PENDING or outcome is Followed.SKIPPED
        ]
        if asked:  # behind the others next run, so none waits on sends that stay pending
            async with self._storage.write() as unit:
                await unit.sends.checked_chain(asked, self._clock.now())
        settled = outcomes.count(Followed.SETTLED)
        pending = len(outcomes) - settled - outcomes.count(Followed.LOST)
        self.observer.sends_pending(pending)
        log.info("follow: %d of %d sends pending on chain became final", settled, len(followed))
        return settled

    async def settle_coins(self) -> int:
        """Carry trades' settlements on (walletcore.services.settlements): deliveries made
        or retried, sent transfers looked up, reserved ones whose trade ended moved; how
        many moved. Nothing when trades move no coins."""
        if self._settlements is None:
            raise RuntimeError("settle_coins needs the settlements (Jobs(settlements=))")
        settlements = self._settlements()
        if settlements is None:  # WALLETCORE_SETTLEMENT_ENABLED=false
            return 0
        report = await settlements.run(f"job-settlement-{new_id()}", self._settle_batch)
        if report.looked_at:
            log.info(
                "settlement: %d of %d due settlements moved (%d errors)",
                report.moved,
                report.looked_at,
                report.errors,
            )
        return report.moved

    async def reconcile_desk(self) -> int:
        """Account every client's desk (walletcore.services.desk) and tell the observer its
        figures; how many differences it found. Nothing when trades move no coins."""
        if self._desk is None:
            raise RuntimeError("reconcile_desk needs the desk's accounting (Jobs(desk=))")
        desk = self._desk()
        if desk is None:  # WALLETCORE_SETTLEMENT_ENABLED=false
            return 0
        desks = await desk.reconcile(f"job-reconcile-{new_id()}")
        for client in desks:
            for account in client.assets:
                asset = account.asset
                scale = Decimal(10) ** asset.decimals
                self.observer.desk_account(
                    client.client_id,
                    asset.symbol,
                    balance=None if account.balance is None else float(account.balance / scale),
                    owed=float(account.owed / scale),
                    incoming=float(account.incoming / scale),
                    mismatches=len(account.mismatches),
                    paused=account.pause is not None,
                )
        found = sum(len(c.mismatches) for c in desks)
        log.info("desk: %d clients reconciled, %d differences", len(desks), found)
        return found

    async def scan_deposits(self) -> int:
        """Scan every scanning chain for deposits (walletcore.services.deposits); how many
        deposits were found or moved to `confirmed` / `reversed`."""
        if self._deposits is None:
            raise RuntimeError("scan_deposits needs the deposit watch (Jobs(deposits=))")
        reports = await self._deposits().run()
        for report in reports:
            self.observer.deposit_scan(
                str(report.chain),
                head=report.head,
                cursor=report.cursor,
                seconds=report.seconds,
                failed=report.error is not None,
            )
            if report.blocks or report.found or report.confirmed or report.reversed:
                log.info(
                    "deposits on %s: %d blocks to %s, %d found, %d confirmed, %d reversed",
                    report.chain,
                    report.blocks,
                    report.cursor,
                    report.found,
                    report.confirmed,
                    report.reversed,
                )
        return sum(r.found + r.confirmed + r.reversed for r in reports)

    async def prune_events(self) -> int:
        """Delete the events older than the feed's retention; how many."""
        if self._events is None:
            raise RuntimeError("prune_events needs the event feed (Jobs(events=))")
        return await self._events().prune()

    async def deliver_webhooks(self) -> int:
        """Post the due webhook endpoints' events (walletcore.services.webhooks); how many
        were delivered (2xx)."""
        if self._webhooks is None:
            raise RuntimeError("deliver_webhooks needs the webhooks (Jobs(webhooks=))")
        webhooks = self._built_webhooks = self._webhooks()
        return (await webhooks.deliver()).delivered

    async def prune_webhook_deliveries(self) -> int:
        """Delete the delivery log's attempts older than the feed's retention; how many."""
        if self._webhooks is None:
            raise RuntimeError("prune_webhook_deliveries needs the webhooks (Jobs(webhooks=))")
        return await self._webhooks().prune()

    async def expire_approvals(self) -> int:
        """End the held transfers whose approval ran out of time; how many."""
        if self._policies is None:
            raise RuntimeError("expire_approvals needs the policies (Jobs(policies=))")
        return await self._policies().expire_due()

    async def prune_policy_usage(self) -> int:
        """Delete the velocity counts no policy window reaches any more; how many."""
        if self._policies is None:
            raise RuntimeError("prune_policy_usage needs the policies (Jobs(policies=))")
        return await self._policies().prune()


__all__ = ["Jobs", "PeriodicJob", "PriceFeed"]
