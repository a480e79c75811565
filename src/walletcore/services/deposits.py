"""Deposits: every credit to a watched address found on its chain, followed to `confirmed`
or `reversed`, each move stored once with its audit entry and its event (docs/events.md).

One run of `DepositWatch.scan(chain)` (the `scan_deposits` job, walletcore.jobs):

1. **Where to start.** The chain's cursor (`unit.deposits.cursor`): the last block scanned,
   as the chain had it. If the node has another block at that height now (a reorg, or a
   node that went back), the cursor is moved back `confirmations` blocks and those blocks
   are scanned again: what they hold is found again (deduplicated by key), and a deposit
   whose transaction left the chain is settled below. A chain never scanned starts
   `confirmations` blocks below the head, so recent deposits are seen too.
2. **The head, then the watch list** (every user and platform address of the chain), in
   that order: an address handed out before a block was mined is in the list that scans it.
3. **Ranges up to the head**, `scan_span` blocks each, one after the other: the scanner's
   findings for a range and the cursor at its last block are stored in one write unit, the
   cursor by compare-and-set on where it was, so a range is stored once even when two
   processes scan together, and a process killed mid-run resumes at the last range it
   stored: no gap, no double count. No catch-up cap: a day-long outage is scanned block by
   block; a run stops after `run_seconds` and the next one goes on from its cursor.
4. **The mempool**, where the scanner reads one: credits seen before they are mined.
5. **Settling** the `seen` deposits: each transaction `locate`d again; `confirmations`
   deep (its block included) and still where it was found: `confirmed`; in another block
   or back in the mempool: still `seen`, at its new place; nowhere: `reversed`.

Errors of a chain's node end that chain's run (logged; the next run retries from the
cursor); other chains go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.deposits import (
    BlockRef,
    Deposit,
    DepositStatus,
    Incoming,
    ScanCursor,
    Watched,
)
from walletcore.domain.events import EventType
from walletcore.domain.ids import new_id
from walletcore.ports import Clock, Storage, UnitOfWork
from walletcore.ports.chains import ChainGateway
from walletcore.ports.deposits import MEMPOOL, DepositScanner
from walletcore.services.audit import Auditor
from walletcore.services.event_notes import deposit_note

log = logging.getLogger("walletcore.deposits")

#: `locate` calls one settling pass makes at once.
LOCATE_CONCURRENCY = 8


@dataclass(slots=True)
class ScanReport:
    """What one run did on one chain."""

    chain: Chain
    #: Blocks scanned (ranges stored) and the cursor's height after the run.
    blocks: int = 0
    cursor: int | None = None
    head: int | None = None
    #: A reorg moved the cursor back.
    rewound: bool = False
    found: int = 0
    confirmed: int = 0
    reversed: int = 0
    #: The run ended on this error (the next run retries from the cursor).
    error: str | None = None
    watched: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)


class _Lost(Exception):
    """Another run stored this range first: roll the unit back and stop."""


class DepositWatch:
    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        gateways: Mapping[Chain, ChainGateway],
        catalog: Catalog,
        run_seconds: float = 30.0,
        settle_batch: int = 200,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._catalog = catalog
        self._auditor = Auditor(storage, clock)
        self._run_seconds = run_seconds
        self._settle_batch = settle_batch
        self._scanners: dict[Chain, DepositScanner] = {
            chain: gateway
            for chain, gateway in gateways.items()
            if isinstance(gateway, DepositScanner)
        }

    @property
    def chains(self) -> tuple[Chain, ...]:
        """The served chains whose gateway scans for deposits."""
        return tuple(self._scanners)

    async def run(self) -> list[ScanReport]:
        """One run on every scanning chain, side by side."""
        return list(await asyncio.gather(*(self.scan(chain) for chain in self._scanners)))

    async def scan(self, chain: Chain) -> ScanReport:
        report = ScanReport(chain)
        started = time.monotonic()
        try:
            await self._scan(chain, self._scanners[chain], report, started)
        except _Lost:
            log.info("deposits on %s: another run stored the range first", chain)
        except Exception as exc:  # noqa: BLE001 - one chain's node fails its run only
            report.error = type(exc).__name__
            log.warning(
                "deposits on %s: the run stopped at %s (%s); the next run resumes there",
                chain,
                report.cursor,
                type(exc).__name__,
            )
        report.seconds = time.monotonic() - started
        return report

    async def _scan(
        self, chain: Chain, scanner: DepositScanner, report: ScanReport, started: float
    ) -> None:
        async with self._storage.read() as unit:
            cursor = await unit.deposits.cursor(chain)
        head = await scanner.head()
        report.head = head.height
        async with self._storage.read() as unit:  # after the head: see _scan's step 2
            watch = await unit.deposits.watchlist(chain)
        report.watched = len(watch)
        expected, previous = await self._start(chain, scanner, cursor, head, report)
        if expected is None:  # the chain's first run: its cursor starts here
            async with self._storage.write() as unit:
                start = ScanCursor(chain, previous, self._clock.now())
                if not await unit.deposits.advance(chain, None, start):
                    raise _Lost()
            expected = previous
        request_id = f"job-scan-{new_id()}"
        while previous.height < head.height:
            first = previous.height + 1
            last = min(previous.height + scanner.scan_span, head.height)
            ranged = await self._scan_range(scanner, previous, first, last, watch, report)
            if ranged is None:  # the chain moved under the scan: the next run sees it
                break
            reached, found = ranged
            now = self._clock.now()
            async with self._storage.write() as unit:
                if not await unit.deposits.advance(
                    chain, expected, ScanCursor(chain, reached, now)
                ):
                    raise _Lost()
                for incoming in found:
                    await self._record(unit, incoming, watch, request_id, report)
            expected = previous = reached
            report.blocks += last - first + 1
            report.cursor = reached.height
            if time.monotonic() - started > self._run_seconds:
                break
        if watch:
            pending = await scanner.mempool(watch.keys())
            if pending:
                async with self._storage.write() as unit:
                    for incoming in pending:
                        await self._record(unit, incoming, watch, request_id, report)
        await self._settle(chain, scanner, head, request_id, report)

    async def _scan_range(
        self,
        scanner: DepositScanner,
        previous: BlockRef,
        first: int,
        last: int,
        watch: Mapping[str, Watched],
        report: ScanReport,
    ) -> tuple[BlockRef, list[Incoming]] | None:
        """The credits in `first..last`, and the block at `last` they were found under;
        None when the chain changed while they were read (a reorg mid-scan): the block at
        `last` is read before and after the scan and must not change, and `previous` must
        still be its ancestor after it, so what is stored is one branch, linked to the
        cursor. A hash names all its ancestors, so the two reads prove the range."""
        before = await scanner.block(last)
        if before is None:
            return None
        found = await scanner.scan(first, last, watch.keys()) if watch else []
        after = await scanner.block(last)
        linked = await scanner.block(previous.height)
        if after != before or linked != previous:
            log.warning(
                "deposits on %s: the chain changed while blocks %d to %d were read; "
                "the next run reads them again",
                report.chain,
                first,
                last,
            )
            return None
        return before, found

    async def _start(
        self,
        chain: Chain,
        scanner: DepositScanner,
        cursor: ScanCursor | None,
        head: BlockRef,
        report: ScanReport,
    ) -> tuple[BlockRef | None, BlockRef]:
        """The stored cursor's block (the compare-and-set's `expected`) and the block
        after which this run scans."""
        if cursor is None:
            start = await scanner.block(max(0, head.height - scanner.confirmations))
            if start is None:
                raise LookupError("the node has no block below its head")
            report.cursor = start.height
            return None, start
        stored = cursor.block
        report.cursor = stored.height
        now = await scanner.block(stored.height) if stored.height <= head.height else None
        if now is not None and now.hash == stored.hash:
            return stored, stored
        # A reorg (or a node behind the one that was scanned): scan the last blocks again.
        back = max(0, min(stored.height, head.height) - scanner.confirmations)
        start = await scanner.block(back)
        if start is None:
            raise LookupError("the node has no block below its head")
        log.warning(
            "deposits on %s: block %d is not the one scanned (a reorg); scanning again from %d",
            chain,
            stored.height,
            back + 1,
        )
        report.rewound = True
        report.cursor = start.height
        return stored, start

    async def _record(
        self,
        unit: UnitOfWork,
        incoming: Incoming,
        watch: Mapping[str, Watched],
        request_id: str,
        report: ScanReport,
    ) -> None:
        whose = watch.get(incoming.address)
        if whose is None:
            return  # not a watched address (a scanner's stray report)
        stored = await unit.deposits.get(incoming.chain, incoming.tx_hash, incoming.position)
        now = self._clock.now()
        if stored is None:
            deposit = Deposit.of(new_id(), incoming, whose, now)
            entry = self._entry(deposit, "deposit.seen", request_id, EventType.DEPOSIT_SEEN)
            if await unit.deposits.add(deposit, entry=entry):
                report.found += 1
                report.events.append(EventType.DEPOSIT_SEEN)
            return
        if stored.status is DepositStatus.REVERSED:
            again = stored.seen_again(incoming.block)
            entry = self._entry(again, "deposit.seen", request_id, EventType.DEPOSIT_SEEN)
            if await unit.deposits.move(stored, again, entry=entry):
                report.found += 1
                report.events.append(EventType.DEPOSIT_SEEN)
            return
        if (
            stored.status is DepositStatus.SEEN
            and incoming.block is not None
            and stored.block != incoming.block
        ):
            moved = stored.moved_to(incoming.block)
            await unit.deposits.move(
                stored, moved, entry=self._entry(moved, "deposit.move", request_id)
            )

    async def _settle(
        self,
        chain: Chain,
        scanner: DepositScanner,
        head: BlockRef,
        request_id: str,
        report: ScanReport,
    ) -> None:
        async with self._storage.read() as unit:
            unsettled = await unit.deposits.unsettled(chain, self._settle_batch)
        gate = asyncio.Semaphore(LOCATE_CONCURRENCY)

        async def settle(deposit: Deposit) -> None:
            async with gate:
                where = await scanner.locate(deposit.tx_hash, deposit.block)
            now = self._clock.now()
            if where is None:
                new = deposit.reverse(now)
                action, kind = "deposit.reverse", EventType.DEPOSIT_REVERSED
            elif where is MEMPOOL:
                if deposit.block is None:
                    return
                new, action, kind = deposit.moved_to(None), "deposit.move", None
            else:
                assert isinstance(where, BlockRef)
                deep = head.height - where.height + 1 >= scanner.confirmations
                if deep:
                    new = deposit.moved_to(where).confirm(now)
                    action, kind = "deposit.confirm", EventType.DEPOSIT_CONFIRMED
                elif where != deposit.block:
                    new, action, kind = deposit.moved_to(where), "deposit.move", None
                else:
                    return
            entry = self._entry(new, action, request_id, kind)
            async with self._storage.write() as unit:
                moved = await unit.deposits.move(deposit, new, entry=entry)
            if moved and kind is EventType.DEPOSIT_CONFIRMED:
                report.confirmed += 1
            elif moved and kind is EventType.DEPOSIT_REVERSED:
                report.reversed += 1
            if moved and kind is not None:
                report.events.append(kind)

        await asyncio.gather(*(settle(d) for d in unsettled))

    def _entry(
        self,
        deposit: Deposit,
        action: str,
        request_id: str,
        kind: EventType | None = None,
    ) -> AuditEntry:
        where = "mempool" if deposit.block is None else f"block {deposit.block.height}"
        return self._auditor.entry(
            action,
            request_id,
            deposit.client_id,
            user_id=deposit.user_id,
            target=deposit.deposit_id,
            detail=f"{deposit.chain} {deposit.tx_hash} {deposit.position} {where}",
            event=None if kind is None else deposit_note(kind, deposit, self._catalog),
        )


__all__ = ["DepositWatch", "ScanReport"]
