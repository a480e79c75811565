"""Ports of storage: five small stores, one per reason to change, under one unit of work.

    async with storage.write() as unit:          # one transaction
        await unit.trades.swap(TradeStatus.OPEN, executing, entry=entry)
        # the change and its entry together, or neither
    # clean exit: committed; an exception: rolled back, nothing written

Rules every adapter keeps (`walletcore.testing.contracts.StorageContract` checks them):
- A write unit is one transaction: everything it wrote commits when the block ends without
  an exception, and none of it when the block raises (a refusal, a failed audit entry, a
  cancelled task). Write units of one storage do not interleave their writes: each sees
  the committed state plus its own changes.
- A read unit sees committed state (on PostgreSQL each read is its own statement, so two
  reads of one read unit need not see one snapshot) and cannot write: a write method
  called in it raises `RuntimeError`, writing nothing.
- Units do not nest, and none is held across a network call (a venue, a chain): a write
  unit may hold the database's write lock (SQLite) for as long as it is open.
- State changes that must not race are compare-and-sets: `TradeStore.swap` on the trade's
  status, `SendStore.begin` / `SendStore.advance` on the idempotency record of a send,
  `SendStore.track` on a followed send's chain status and transaction. A
  loser writes nothing and answers False (or raises, for `begin`), never waits for the
  winner's whole use case.
- The audit log is append-only and in commit order, so it can serve as an outbox. A use
  case appends the entry of a change in the change's own unit, only when the change
  applied (walletcore.services.audit).
- A refused `/auth` is counted in place on its client (`ClientStore.add_auth_failures`),
  never written as a row of its own: unauthenticated traffic grows no storage.
- Driver errors leave as `StorageUnavailable` (503) or `StorageError` (500), never as the
  driver's own exceptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Protocol

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, AuthFailures, User
from walletcore.domain.deposits import BlockRef, Deposit, ScanCursor, Watched
from walletcore.domain.desk import DeskPause
from walletcore.domain.events import EventNote, EventPage, EventPosition
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.policies import PolicyStore
from walletcore.ports.prices import PriceRecords
from walletcore.ports.webhooks import WebhookStore


class ClientStore(Protocol):
    """The api clients: key hash, enabled assets, fee payers, disabled, key generation."""

    async def add(self, client: ApiClient) -> None:
        """Store a new api client; `InvalidRequest` if its id is taken."""
        ...

    async def get(self, client_id: str) -> ApiClient | None: ...

    async def all(self) -> list[ApiClient]:
        """Every api client, by creation time, then id."""
        ...

    async def update(self, client: ApiClient) -> None:
        """Replace the stored client (stored as new when there was none), all but its
        `auth_failures`: those stay as stored, so an operator's change racing a failed
        `/auth` loses no count."""
        ...

    async def add_auth_failures(
        self, client_id: str, failures: AuthFailures, *, entry: AuditEntry | None = None
    ) -> bool:
        """Add refused `/auth` of the client (`failures`: how many, the first, the latest)
        to its record in place (`ApiClient.auth_failures`, `AuthFailures.added`).

        The stored record is read and changed under the client's lock (`FOR UPDATE`; the
        write lock on SQLite): additions racing each other, a success ending the run and
        an operator's change of the client never lose a count, and never deadlock (one
        row, one lock). An unknown `client_id` stores nothing (False).

        True when these began a run (none was counted): then, and only then, `entry` is
        appended to the audit log in the same unit. So a flood of wrong keys writes one
        entry, and a run needs a successful `/auth` to end.
        """
        ...

    async def auth_succeeded(self, client_id: str) -> AuthFailures:
        """End the client's run of failures (`AuthFailures.ended`) and answer the run as it
        was when ended, read under the same lock: a failure racing this counts in that run
        or begins the next. An unknown client: nothing stored, an empty run.
        """
        ...


class WalletStore(Protocol):
    """Users and their wallets, and the platform wallet of each api client."""

    async def add_user(
        self, user: User, wallet: WalletRecord, *, request_id: str | None = None
    ) -> bool:
        """Store a new user and its wallet together.

        `request_id`: the caller's X-Request-Id, kept per api client: when a user was
        already created under it, nothing is stored and the answer is False (the user of
        that request is `created_by_request`). True when stored.
        """
        ...

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        """The id of the user `add_user` stored under this client's `request_id`."""
        ...

    async def get_user(self, client_id: str, user_id: str) -> User | None: ...

    async def add(self, wallet: WalletRecord) -> bool:
        """Store a wallet unless its owner has one; False when one was there already."""
        ...

    async def get(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None: ...

    async def update(self, wallet: WalletRecord) -> None:
        """Replace the owner's wallet record (stored as new when there was none)."""
        ...


class TradeStore(Protocol):
    """Quotes and trades; every change of status is a compare-and-set (`swap`)."""

    async def add(self, trade: Trade) -> None:
        """A new trade; a trade id stored already fails the unit (`StorageError`)."""
        ...

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        """The trade, only if it belongs to this user of this client."""
        ...

    async def page(
        self,
        client_id: str,
        user_id: str,
        *,
        side: Side | None,
        status: TradeStatus | None,
        limit: int,
    ) -> list[Trade]:
        """Newest first (by creation, then trade id), at most `limit`."""
        ...

    async def swap(
        self, expected: TradeStatus, trade: Trade, *, entry: AuditEntry | None = None
    ) -> bool:
        """Store the move `trade` if the stored trade's status is still `expected`, and
        then (only then) append `entry` to the audit log in the same unit.

        A move writes what a move can change (`walletcore.domain.trade.MOVED_FIELDS`: the
        status, its instants, the approved and executed figures, the reference, the
        failure reason), nothing else: the quote's own fields stay as stored
        (`walletcore.domain.trade.moved`).

        A loser (False) writes nothing and costs one conditional write. Passing the move's
        entry here rather than to `audit.append` after it lets an adapter make both one
        statement (the SQL one does on PostgreSQL).
        """
        ...

    async def lapsed(self, client_id: str, user_id: str, now: datetime) -> list[Trade]:
        """This user's open trades whose quote lapsed by `now` (to `swap` to expired)."""
        ...

    async def in_flight(self, limit: int) -> list[Trade]:
        """Approved and executing trades of every client, oldest first (by creation, then
        trade id), at most `limit`: what the settlement job asks the venue about."""
        ...


class SendStore(Protocol):
    """The idempotency record of a send, one per (api client, X-Request-Id)."""

    async def begin(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        """The record this request works with.

        None stored: a new `started` record leased to the caller. Stored: `SendRecord.claim`
        decides - finished is returned to replay its result (nothing written), a live lease
        is `IdempotencyConflict` (409), a lapsed one is taken over (next `attempt`) to
        resume, another fingerprint is `IdempotencyKeyReused` (422). So the record was
        stored (created or taken over) exactly when the answer is not finished.
        """
        ...

    async def advance(self, current: SendRecord, new: SendRecord) -> bool:
        """Store `new` if the stored record still has `current`'s state and attempt.

        False means another request took the record over: stop, do not broadcast.
        """
        ...

    async def get(self, client_id: str, request_id: str) -> SendRecord | None: ...

    # -- following broadcast transactions on chain (the `follow_sends` job) -------------
    async def count_following(self) -> int:
        """How many sends of every client are followed and not final on chain (`pending`,
        `stuck` or `dropped`: the metrics' gauge)."""
        ...

    async def following(self, limit: int) -> list[SendRecord]:
        """Sends of every client followed and not final on chain (`pending`, `stuck`,
        `dropped`), at most `limit`: the least recently checked first (`chain_checked_at`,
        the finish until `checked_chain` or `track` moved it), then the oldest (created,
        client id, request id)."""
        ...

    async def checked_chain(self, keys: Sequence[tuple[str, str]], at: datetime) -> None:
        """Record that the chain was asked about these (client id, request id) sends at
        `at` and still had them where they were: they go behind the others in `following`.
        Sends already final are left as they are."""
        ...

    async def track(
        self, current: SendRecord, new: SendRecord, *, entry: AuditEntry | None = None
    ) -> bool:
        """A followed send's move on chain (`SendRecord.tracked`): store `new`'s chain
        status, check time, final time and transaction (`tx_hash`, `raw_tx`: a replacement)
        if the stored record still has `current`'s chain status and `tx_hash` (compare and
        set: one of two racing jobs wins); then (only then) append `entry` in the same
        unit. Every hash a send ever had stays findable by `by_hash`."""
        ...

    async def by_hash(self, client_id: str, tx_hash: str) -> SendRecord | None:
        """The send of this client whose transaction is or was `tx_hash` (a hash it had
        before a replacement included), or None."""
        ...

    async def spending(self, client_id: str, user_id: str, asset_id: int) -> int:
        """What the user's own sends of `asset_id` still in flight take out of the wallet:
        the sum of `spend.units` of the records with that spend that are `signed` or
        `broadcast`, or finished and not final on chain (`pending`, `stuck`, `dropped`).
        The service's own transfers (request ids under `RESERVED_REQUEST_PREFIX`) are not
        counted: what they take is held by their settlement."""
        ...


class SettlementStore(Protocol):
    """A trade's crypto leg on chain (walletcore.domain.settlement): one per trade."""

    async def add(self, settlement: Settlement, *, entry: AuditEntry | None = None) -> bool:
        """Store a new settlement, then (only then) `entry`; False (nothing written) when
        the trade has one already."""
        ...

    async def get(self, client_id: str, trade_id: str) -> Settlement | None: ...

    async def of_trades(self, client_id: str, trade_ids: Sequence[str]) -> dict[str, Settlement]:
        """The settlements of those trades of the client that have one, by trade id."""
        ...

    async def move(
        self, current: Settlement, new: Settlement, *, entry: AuditEntry | None = None
    ) -> bool:
        """Store `new` if the stored settlement still has `current`'s status and attempt
        (compare and set: one of two racing movers wins), then (only then) `entry`."""
        ...

    async def lock_wallet(self, client_id: str, user_id: str) -> None:
        """Make the rest of this write unit the only decision about spending the user's
        wallet until it ends (a sell's hold, a send's signature): PostgreSQL locks the
        user's row; where write units are serial already (SQLite, memory) nothing."""
        ...

    async def held(self, client_id: str, user_id: str, asset_id: int) -> int:
        """What the user's sells hold of `asset_id` (smallest units): `units` of those of
        that asset and `fee_units` of those whose fee is in it, in a holding status
        (`HOLDING_STATUSES`). Buys hold nothing in the user's wallet."""
        ...

    async def due(self, now: datetime, limit: int) -> list[Settlement]:
        """Settlements of every client in a status the jobs work on (`DUE_STATUSES`) and
        `due_at` at or before `now`, at most `limit`, the earliest due first (then trade id)."""
        ...

    async def listing(
        self,
        client_id: str,
        *,
        asset_id: int | None = None,
        statuses: frozenset[SettlementStatus] | None = None,
        limit: int = 100,
    ) -> list[Settlement]:
        """The client's settlements (of one asset, in some statuses), newest first (by
        creation, then trade id), at most `limit`: the desk's accounting."""
        ...


class DeskPauseStore(Protocol):
    """Deliveries of an asset paused for an api client (walletcore.domain.desk): at most one
    pause per (client, asset)."""

    async def pause(self, pause: DeskPause, *, entry: AuditEntry | None = None) -> bool:
        """Store the pause, then (only then) `entry`; False (nothing written) when that
        client's asset is paused already (the standing pause is kept)."""
        ...

    async def resume(
        self, client_id: str, asset_id: int, *, entry: AuditEntry | None = None
    ) -> bool:
        """Remove the pause, then (only then) `entry`; False when there was none."""
        ...

    async def get(self, client_id: str, asset_id: int) -> DeskPause | None: ...

    async def of_client(self, client_id: str) -> list[DeskPause]:
        """The client's pauses, by asset id."""
        ...


class AuditStore(Protocol):
    """The append-only audit log (walletcore.domain.audit), and the event feed's outbox:
    an entry that carries an `event` writes that event too, in the same unit."""

    async def append(self, entry: AuditEntry) -> None:
        """Append one entry (and its event, if it carries one); one no store could keep
        (`storable`) fails the unit."""
        ...

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        """Newest first, at most `limit`."""
        ...


class DepositStore(Protocol):
    """Deposits found by the chains' scanners, the watched addresses, and one scan cursor
    per chain (walletcore.domain.deposits)."""

    async def watchlist(self, chain: Chain) -> dict[str, Watched]:
        """Every wallet address of `chain` (users' and platform wallets'), as the wallet
        stores it, with whose it is. A wallet stored by `WalletStore.add` or `update` is in
        it from the same commit."""
        ...

    async def whose(self, chain: Chain, address: str) -> Watched | None:
        """Whose wallet `address` of `chain` is (as `watchlist` has it), or None: one read
        of the watch list's key, so a policy can tell a transfer between wallets of one
        api client from one that leaves them."""
        ...

    async def cursor(self, chain: Chain) -> ScanCursor | None:
        """How far `chain` was scanned; None before its first scan."""
        ...

    async def advance(self, chain: Chain, expected: BlockRef | None, cursor: ScanCursor) -> bool:
        """Store `cursor` if the stored one still ends at `expected` (None: none stored):
        a compare-and-set, so of two scans of one range one stores its findings."""
        ...

    async def add(self, deposit: Deposit, *, entry: AuditEntry | None = None) -> bool:
        """Store a new deposit unless one with its key (`chain`, `tx_hash`, `position`)
        is stored; then (only then) append `entry` in the same unit. False: it was there,
        nothing written."""
        ...

    async def get(self, chain: Chain, tx_hash: str, position: str) -> Deposit | None: ...

    async def move(
        self, current: Deposit, new: Deposit, *, entry: AuditEntry | None = None
    ) -> bool:
        """Store `new`'s status, block and times if the stored deposit still has
        `current`'s status and block (compare-and-set); then (only then) append `entry`."""
        ...

    async def unsettled(self, chain: Chain, limit: int) -> list[Deposit]:
        """`seen` deposits of `chain` (mempool or not yet deep enough), oldest first (seen
        time, then key), at most `limit`: what the job checks again each run."""
        ...

    async def page(self, client_id: str, user_id: str | None, *, limit: int) -> list[Deposit]:
        """The client's deposits, of one user (`user_id`) or all (None), newest first."""
        ...


class EventStore(Protocol):
    """The event feed as stored (walletcore.domain.events). Events are written by
    `AuditStore.append` (and the trade moves' own statements) with their change."""

    async def after(
        self,
        client_id: str,
        position: EventPosition | None,
        *,
        limit: int,
        user_id: str | None = None,
    ) -> EventPage:
        """The client's events after `position` (None: from the oldest kept), oldest
        first, at most `limit`, of one user when `user_id` is given. Only events no later
        commit can precede: a reader that moves its cursor to the last event it got never
        misses one (PostgreSQL holds back events behind a transaction still open)."""
        ...

    async def publish(
        self, client_id: str, user_id: str | None, note: EventNote, at: datetime
    ) -> None:
        """Write the event of a change this unit makes that carries no audit entry of its
        own (a send the network accepted): in this unit, so with the change or not at
        all."""
        ...

    async def has(self, client_id: str, position: EventPosition) -> bool:
        """True when the client's event at `position` is still kept."""
        ...

    async def oldest(self, client_id: str) -> EventPosition | None:
        """The client's oldest kept event."""
        ...

    async def prune(self, before: datetime, limit: int) -> int:
        """Delete at most `limit` events older than `before`, oldest first; how many."""
        ...


class UnitOfWork(Protocol):
    """The stores, all in one transaction."""

    clients: ClientStore
    wallets: WalletStore
    trades: TradeStore
    sends: SendStore
    audit: AuditStore
    deposits: DepositStore
    events: EventStore
    #: trades' crypto legs on chain: holds, deliveries, collections
    settlements: SettlementStore
    #: deliveries paused by the desk's reconciliation or the operator
    desk_pauses: DeskPauseStore
    #: the api clients' webhook endpoints and delivery log (walletcore.ports.webhooks)
    webhooks: WebhookStore
    #: the deployment's shared price table (walletcore.ports.prices)
    prices: PriceRecords
    #: withdrawal policies, the allowlist, velocity usage, approvals, operators
    #: (walletcore.ports.policies)
    policies: PolicyStore


class Storage(Protocol):
    """Where api clients, users and wallets, trades, sends and the audit log are kept.

    Adapters with connections also implement `Lifecycle` (start: migrate or check the
    schema; aclose: let the connections go).
    """

    def write(self) -> AbstractAsyncContextManager[UnitOfWork]:
        """`async with storage.write() as unit:` one writing transaction (module rules)."""
        ...

    def read(self) -> AbstractAsyncContextManager[UnitOfWork]:
        """`async with storage.read() as unit:` reads of committed state; no writes."""
        ...

    async def swap_trade(self, expected: TradeStatus, trade: Trade, entry: AuditEntry) -> bool:
        """A write unit of its own holding `unit.trades.swap(expected, trade, entry=entry)`,
        and nothing else: every move of a trade the services make.

        Its own method so an adapter can make it one statement with no transaction around
        it (the SQL one does on PostgreSQL: one round trip rather than BEGIN, the statement
        and COMMIT). An adapter without such a shortcut writes exactly that unit.
        """
        ...

    async def add_trade(self, trade: Trade, entry: AuditEntry) -> None:
        """A write unit of its own holding `unit.trades.add(trade)` then
        `unit.audit.append(entry)`, and nothing else: every quote the services store.

        Its own method for `swap_trade`'s reason (the SQL adapter sends it as one statement
        on PostgreSQL, with no unit of stores built around it). This default writes exactly
        that unit: an adapter that subclasses `Storage` needs no shortcut of its own.
        """
        async with self.write() as unit:
            await unit.trades.add(trade)
            await unit.audit.append(entry)


__all__ = [
    "AuditStore",
    "ClientStore",
    "DepositStore",
    "DeskPauseStore",
    "EventStore",
    "SendStore",
    "SettlementStore",
    "Storage",
    "TradeStore",
    "UnitOfWork",
    "WalletStore",
]
