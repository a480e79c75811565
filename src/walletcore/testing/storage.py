"""The in-memory Storage: the reference implementation of the storage contract
(`walletcore.testing.contracts.StorageContract`), for tests and `WALLETCORE_REPO=memory`.

- A write unit holds one lock (one writer at a time, as SQLite's `BEGIN IMMEDIATE`) and
  stages its changes over the committed tables; they are applied all at once, with no
  await in between, when the block ends cleanly. Readers never see a unit's changes before
  it commits, and an exception discards them all.
- A read unit reads the committed tables without the lock, and cannot write.
- The event feed: an entry that carries an event (and `events.publish`) writes it with
  the unit, at `EventPosition(0, seq)`, `seq` counting up per storage: write units never
  overlap, so the feed's order is the commit order. Its data is kept as JSON keeps it.
- The watch list is a table of its own, as the SQL one is: `wallets.add`, `add_user` and
  `update` add each address of the wallet not watched yet (an address never changes
  owner, and stays watched when a wallet's record changes).
- Webhooks: the endpoints are a table like the others; the delivery log one keyed by a
  serial, an attempt pruned staged as a tombstone (None) and dropped at commit. A desk
  pause removed is staged the same way.
- Lost on restart.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import ChainMap
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from walletcore.domain.assets import Chain, Fiat
from walletcore.domain.audit import AuditEntry, storable
from walletcore.domain.clients import ApiClient, AuthFailures, User
from walletcore.domain.deposits import BlockRef, Deposit, DepositStatus, ScanCursor, Watched
from walletcore.domain.desk import DeskPause
from walletcore.domain.errors import InvalidRequest, InvalidSendTransition, StorageError
from walletcore.domain.events import Event, EventNote, EventPage, EventPosition
from walletcore.domain.policies import (
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Operator,
    Policy,
    PolicyVersion,
    Usage,
    WalletKind,
)
from walletcore.domain.sends import SEND_LEASE, SendRecord, SendState
from walletcore.domain.settlement import (
    DUE_STATUSES,
    RESERVED_REQUEST_PREFIX,
    Settlement,
    SettlementStatus,
)
from walletcore.domain.trade import IN_FLIGHT_STATUSES, Side, Trade, TradeStatus, moved
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.domain.webhooks import DeliveryAttempt, WebhookEndpoint
from walletcore.ports.policies import PolicyStore
from walletcore.ports.prices import PriceRecords, StoredPrices
from walletcore.ports.storage import (
    AuditStore,
    ClientStore,
    DepositStore,
    DeskPauseStore,
    EventStore,
    SendStore,
    SettlementStore,
    Storage,
    TradeStore,
    UnitOfWork,
    WalletStore,
)
from walletcore.ports.webhooks import WebhookStore

WalletKey = tuple[str, WalletOwner, str | None]
#: (client id, chain, address, asset id or None): one destination of an allowlist
AllowKey = tuple[str, str, str, int | None]


@dataclass
class _Tables:
    clients: MutableMapping[str, ApiClient] = field(default_factory=dict)
    users: MutableMapping[tuple[str, str], User] = field(default_factory=dict)
    wallets: MutableMapping[WalletKey, WalletRecord] = field(default_factory=dict)
    trades: MutableMapping[str, Trade] = field(default_factory=dict)
    sends: MutableMapping[tuple[str, str], SendRecord] = field(default_factory=dict)
    #: (client id, a hash a send had before a replacement, or has now) -> X-Request-Id
    send_hashes: MutableMapping[tuple[str, str], str] = field(default_factory=dict)
    #: (client id, X-Request-Id) -> the user `/create` made for it
    creations: MutableMapping[tuple[str, str], str] = field(default_factory=dict)
    #: (symbol, fiat) -> (price, when recorded): the shared price table
    prices: MutableMapping[tuple[str, Fiat], tuple[Decimal, datetime]] = field(default_factory=dict)
    #: (chain, address) -> whose it is: every address a wallet was stored with
    watched: MutableMapping[tuple[str, str], Watched] = field(default_factory=dict)
    #: (chain, tx hash, position) -> the deposit
    deposits: MutableMapping[tuple[str, str, str], Deposit] = field(default_factory=dict)
    #: chain -> how far it was scanned
    cursors: MutableMapping[str, ScanCursor] = field(default_factory=dict)
    #: client id -> its webhook endpoint
    webhooks: MutableMapping[str, WebhookEndpoint] = field(default_factory=dict)
    #: serial -> an attempt of the delivery log (None: pruned by this unit, dropped at commit)
    webhook_attempts: MutableMapping[int, DeliveryAttempt | None] = field(default_factory=dict)
    #: (client id, trade id) -> the trade's settlement
    settlements: MutableMapping[tuple[str, str], Settlement] = field(default_factory=dict)
    #: (client id, asset id) -> its deliveries' pause (None: removed by this unit)
    desk_pauses: MutableMapping[tuple[str, int], DeskPause | None] = field(default_factory=dict)
    #: (client id, version) -> a version of its policy (None: cancelled by this unit)
    policy_versions: MutableMapping[tuple[str, int], PolicyVersion | None] = field(
        default_factory=dict
    )
    #: a destination of a client's allowlist (None: removed by this unit)
    allowlist: MutableMapping[AllowKey, AllowlistEntry | None] = field(default_factory=dict)
    #: (client id, request id) -> a transfer counted (None: given back or pruned by this unit)
    policy_usage: MutableMapping[tuple[str, str], Usage | None] = field(default_factory=dict)
    #: approval id -> a held transfer's approval
    approvals: MutableMapping[str, Approval] = field(default_factory=dict)
    #: name -> an operator
    operators: MutableMapping[str, Operator] = field(default_factory=dict)

    def drop_tombstones(self) -> None:
        """The rows a committed unit pruned or removed (attempts, pauses, versions,
        destinations, counts), gone."""
        _drop_none(self.webhook_attempts)
        _drop_none(self.desk_pauses)
        _drop_none(self.policy_versions)
        _drop_none(self.allowlist)
        _drop_none(self.policy_usage)


def _drop_none(table: MutableMapping[Any, Any]) -> None:
    for key in [k for k, v in table.items() if v is None]:
        del table[key]


#: The delivery log's serials, shared by every in-memory storage (unique is all they need).
_ATTEMPT_SERIALS = itertools.count(1)

_TABLES = (
    "clients",
    "users",
    "wallets",
    "trades",
    "sends",
    "send_hashes",
    "creations",
    "prices",
    "watched",
    "deposits",
    "cursors",
    "webhooks",
    "webhook_attempts",
    "settlements",
    "desk_pauses",
    "policy_versions",
    "allowlist",
    "policy_usage",
    "approvals",
    "operators",
)


class _Feed:
    """The events one storage committed, in feed order, and the next `seq`."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.seq = 0

    def next_position(self) -> EventPosition:
        self.seq += 1
        return EventPosition(0, self.seq)


class _Unit(UnitOfWork):
    """One unit over `tables` (the committed ones for a read, a staged layer for a write)."""

    def __init__(
        self,
        tables: _Tables,
        committed_audit: list[AuditEntry],
        feed: _Feed,
        *,
        writable: bool,
    ) -> None:
        self.tables = tables
        self.writable = writable
        self.pending_audit: list[AuditEntry] = []
        self.committed_audit = committed_audit
        self.feed = feed
        #: events this unit wrote, and the positions of those it pruned (applied at commit)
        self.pending_events: list[Event] = []
        self.pruned: set[EventPosition] = set()
        self.clients: ClientStore = _Clients(self)
        self.wallets: WalletStore = _Wallets(self)
        self.trades: TradeStore = _Trades(self)
        self.sends: SendStore = _Sends(self)
        self.audit: AuditStore = _Audit(self)
        self.deposits: DepositStore = _Deposits(self)
        self.events: EventStore = _Events(self)
        self.webhooks: WebhookStore = _Webhooks(self)
        self.prices: PriceRecords = _Prices(self)
        self.settlements: SettlementStore = _Settlements(self)
        self.desk_pauses: DeskPauseStore = _DeskPauses(self)
        self.policies: PolicyStore = _Policies(self)

    def check_writable(self) -> _Tables:
        if not self.writable:
            raise RuntimeError("a read unit cannot write; use storage.write()")
        return self.tables

    def publish(self, client_id: str, user_id: str | None, note: EventNote, at: datetime) -> None:
        """Stage the event of a change of this unit (written when the unit commits)."""
        self.check_writable()
        if not isinstance(note, EventNote) or not isinstance(at, datetime):
            raise TypeError("an event needs its EventNote and its time")
        # stored as a database stores it: JSON (a value JSON cannot hold fails the unit)
        data = json.loads(json.dumps(dict(note.data)))
        event = Event(self.feed.next_position(), client_id, user_id, str(note.type), at, data)
        self.pending_events.append(event)

    def watch(self, wallet: WalletRecord) -> None:
        """Each address of `wallet` not watched yet, as its (module rules)."""
        watched = self.check_writable().watched
        whose = Watched(wallet.client_id, wallet.owner, wallet.user_id)
        for chain, address in wallet.addresses.items():
            if (str(chain), address) not in watched:
                watched[(str(chain), address)] = whose

    def kept_events(self) -> list[Event]:
        """The events as this unit sees them: committed (less those it pruned), then its own."""
        kept = [e for e in self.feed.events if e.position not in self.pruned]
        return kept + self.pending_events


class _Clients(ClientStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def add(self, client: ApiClient) -> None:
        tables = self._unit.check_writable()
        if client.client_id in tables.clients:
            raise InvalidRequest("api client exists already")
        tables.clients[client.client_id] = client

    async def get(self, client_id: str) -> ApiClient | None:
        return self._unit.tables.clients.get(client_id)

    async def all(self) -> list[ApiClient]:
        return list(self._unit.tables.clients.values())

    async def update(self, client: ApiClient) -> None:
        clients = self._unit.check_writable().clients
        stored = clients.get(client.client_id)
        if stored is not None:  # the failures are /auth's to change, never an update's
            client = replace(client, auth_failures=stored.auth_failures)
        clients[client.client_id] = client

    async def add_auth_failures(
        self, client_id: str, failures: AuthFailures, *, entry: AuditEntry | None = None
    ) -> bool:
        clients = self._unit.check_writable().clients
        stored = clients.get(client_id)
        if stored is None:
            return False
        began = stored.auth_failures.count == 0
        if began and entry is not None:
            await self._unit.audit.append(entry)  # refuses an entry no store could keep
        clients[client_id] = replace(stored, auth_failures=stored.auth_failures.added(failures))
        return began

    async def auth_succeeded(self, client_id: str) -> AuthFailures:
        clients = self._unit.check_writable().clients
        stored = clients.get(client_id)
        if stored is None:
            return AuthFailures()
        run = stored.auth_failures
        if run != run.ended():
            clients[client_id] = replace(stored, auth_failures=run.ended())
        return run


class _Wallets(WalletStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def add_user(
        self, user: User, wallet: WalletRecord, *, request_id: str | None = None
    ) -> bool:
        tables = self._unit.check_writable()
        if request_id is not None:
            if (user.client_id, request_id) in tables.creations:
                return False
            tables.creations[(user.client_id, request_id)] = user.user_id
        tables.users[(user.client_id, user.user_id)] = user
        tables.wallets[_wallet_key(wallet)] = wallet
        self._unit.watch(wallet)
        return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        return self._unit.tables.creations.get((client_id, request_id))

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        return self._unit.tables.users.get((client_id, user_id))

    async def add(self, wallet: WalletRecord) -> bool:
        tables = self._unit.check_writable()
        key = _wallet_key(wallet)
        if key in tables.wallets:
            return False
        tables.wallets[key] = wallet
        self._unit.watch(wallet)
        return True

    async def get(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        return self._unit.tables.wallets.get((client_id, owner, user_id))

    async def update(self, wallet: WalletRecord) -> None:
        self._unit.check_writable().wallets[_wallet_key(wallet)] = wallet
        self._unit.watch(wallet)


class _Trades(TradeStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def add(self, trade: Trade) -> None:
        tables = self._unit.check_writable()
        if trade.trade_id in tables.trades:  # the primary key, as the SQL store's
            raise StorageError()
        tables.trades[trade.trade_id] = trade

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        trade = self._unit.tables.trades.get(trade_id)
        if trade is None or trade.client_id != client_id or trade.user_id != user_id:
            return None
        return trade

    async def page(
        self,
        client_id: str,
        user_id: str,
        *,
        side: Side | None,
        status: TradeStatus | None,
        limit: int,
    ) -> list[Trade]:
        mine = [
            t
            for t in self._mine(client_id, user_id)
            if (side is None or t.side is side) and (status is None or t.status is status)
        ]
        mine.sort(key=lambda t: (t.created_at, t.trade_id), reverse=True)
        return mine[: max(limit, 0)]

    async def swap(
        self, expected: TradeStatus, trade: Trade, *, entry: AuditEntry | None = None
    ) -> bool:
        tables = self._unit.check_writable()
        stored = tables.trades.get(trade.trade_id)
        if stored is None or stored.status is not expected:
            return False
        if entry is not None:
            await self._unit.audit.append(entry)  # refuses an entry no store could keep
        tables.trades[trade.trade_id] = moved(stored, trade)
        return True

    async def lapsed(self, client_id: str, user_id: str, now: datetime) -> list[Trade]:
        return [t for t in self._mine(client_id, user_id) if t.lapses_unapproved(now)]

    async def in_flight(self, limit: int) -> list[Trade]:
        found = [t for t in self._unit.tables.trades.values() if t.status in IN_FLIGHT_STATUSES]
        found.sort(key=lambda t: (t.created_at, t.trade_id))
        return found[: max(limit, 0)]

    def _mine(self, client_id: str, user_id: str) -> list[Trade]:
        return [
            t
            for t in self._unit.tables.trades.values()
            if t.client_id == client_id and t.user_id == user_id
        ]


class _Sends(SendStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def begin(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        tables = self._unit.check_writable()
        stored = tables.sends.get((client_id, request_id))
        if stored is None:
            record = SendRecord.start(client_id, request_id, fingerprint, now, lease)
        else:
            record = stored.claim(fingerprint, now, lease)
        if record is not stored:
            tables.sends[(client_id, request_id)] = record
        return record

    async def advance(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        tables = self._unit.check_writable()
        key = (current.client_id, current.request_id)
        stored = tables.sends.get(key)
        if stored is None or (stored.state, stored.attempt) != (current.state, current.attempt):
            return False
        tables.sends[key] = new
        return True

    async def get(self, client_id: str, request_id: str) -> SendRecord | None:
        return self._unit.tables.sends.get((client_id, request_id))

    async def count_following(self) -> int:
        return sum(r.is_followed for r in self._unit.tables.sends.values())

    async def following(self, limit: int) -> list[SendRecord]:
        found = [r for r in self._unit.tables.sends.values() if r.is_followed]
        found.sort(
            key=lambda r: (
                r.chain_checked_at or r.created_at,
                r.created_at,
                r.client_id,
                r.request_id,
            )
        )
        return found[: max(limit, 0)]

    async def checked_chain(self, keys: Sequence[tuple[str, str]], at: datetime) -> None:
        tables = self._unit.check_writable()
        for key in keys:
            stored = tables.sends.get(key)
            if stored is not None and stored.is_followed:
                tables.sends[key] = replace(stored, chain_checked_at=at)

    async def track(
        self, current: SendRecord, new: SendRecord, *, entry: AuditEntry | None = None
    ) -> bool:
        current.require_successor(new)
        if new.chain_status is None:
            raise InvalidSendTransition()
        tables = self._unit.check_writable()
        key = (current.client_id, current.request_id)
        stored = tables.sends.get(key)
        if (
            stored is None
            or not stored.is_followed
            or (stored.chain_status, stored.tx_hash) != (current.chain_status, current.tx_hash)
        ):
            return False
        if entry is not None:
            await self._unit.audit.append(entry)
        tables.sends[key] = stored.tracked(
            new.chain_status,
            new.chain_checked_at or new.updated_at,
            raw_tx=new.raw_tx if new.tx_hash != stored.tx_hash else None,
            tx_hash=new.tx_hash if new.tx_hash != stored.tx_hash else None,
        )
        if stored.tx_hash and new.tx_hash and new.tx_hash != stored.tx_hash:
            tables.send_hashes[(current.client_id, stored.tx_hash)] = current.request_id
            tables.send_hashes[(current.client_id, new.tx_hash)] = current.request_id
        return True

    async def by_hash(self, client_id: str, tx_hash: str) -> SendRecord | None:
        request_id = self._unit.tables.send_hashes.get((client_id, tx_hash))
        if request_id is not None:
            return self._unit.tables.sends.get((client_id, request_id))
        for record in self._unit.tables.sends.values():
            if record.client_id == client_id and record.tx_hash == tx_hash:
                return record
        return None

    async def spending(self, client_id: str, user_id: str, asset_id: int) -> int:
        total = 0
        for (client, request_id), record in self._unit.tables.sends.items():
            spend = record.spend
            if (
                client != client_id
                or spend is None
                or (spend.user_id, spend.asset_id) != (user_id, asset_id)
                or request_id.startswith(RESERVED_REQUEST_PREFIX)
            ):
                continue
            if record.state in _SIGNED_STATES or record.is_followed:
                total += spend.units
        return total


#: A send record's states in which its transaction may reach the network (not finished).
_SIGNED_STATES = frozenset({SendState.SIGNED, SendState.BROADCAST})


class _Settlements(SettlementStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def add(self, settlement: Settlement, *, entry: AuditEntry | None = None) -> bool:
        tables = self._unit.check_writable()
        key = (settlement.client_id, settlement.trade_id)
        if key in tables.settlements:
            return False
        tables.settlements[key] = settlement
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def get(self, client_id: str, trade_id: str) -> Settlement | None:
        return self._unit.tables.settlements.get((client_id, trade_id))

    async def of_trades(self, client_id: str, trade_ids: Sequence[str]) -> dict[str, Settlement]:
        found = (self._unit.tables.settlements.get((client_id, t)) for t in trade_ids)
        return {s.trade_id: s for s in found if s is not None}

    async def move(
        self, current: Settlement, new: Settlement, *, entry: AuditEntry | None = None
    ) -> bool:
        tables = self._unit.check_writable()
        key = (current.client_id, current.trade_id)
        stored = tables.settlements.get(key)
        if new.trade_id != current.trade_id or new.client_id != current.client_id:
            raise ValueError("a settlement moves within its own trade")
        if stored is None or (stored.status, stored.attempt) != (current.status, current.attempt):
            return False
        tables.settlements[key] = new
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def lock_wallet(self, client_id: str, user_id: str) -> None:
        self._unit.check_writable()  # write units are one at a time here

    async def held(self, client_id: str, user_id: str, asset_id: int) -> int:
        total = 0
        for settlement in self._unit.tables.settlements.values():
            owner = (settlement.client_id, settlement.user_id)
            if owner != (client_id, user_id) or settlement.side is not Side.SELL:
                continue  # a buy's transfer comes into the wallet: it holds nothing there
            if not settlement.status.holds:
                continue
            if settlement.asset_id == asset_id:
                total += settlement.units
            if settlement.fee_asset_id == asset_id:
                total += settlement.fee_units
        return total

    async def due(self, now: datetime, limit: int) -> list[Settlement]:
        found = [
            s
            for s in self._unit.tables.settlements.values()
            if s.status in DUE_STATUSES and s.due_at is not None and s.due_at <= now
        ]
        found.sort(key=lambda s: (s.due_at or now, s.trade_id))
        return found[: max(limit, 0)]

    async def listing(
        self,
        client_id: str,
        *,
        asset_id: int | None = None,
        statuses: frozenset[SettlementStatus] | None = None,
        limit: int = 100,
    ) -> list[Settlement]:
        found = [
            s
            for s in self._unit.tables.settlements.values()
            if s.client_id == client_id
            and (asset_id is None or s.asset_id == asset_id)
            and (statuses is None or s.status in statuses)
        ]
        found.sort(key=lambda s: (s.created_at, s.trade_id), reverse=True)
        return found[: max(limit, 0)]


class _DeskPauses(DeskPauseStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def pause(self, pause: DeskPause, *, entry: AuditEntry | None = None) -> bool:
        tables = self._unit.check_writable()
        key = (pause.client_id, pause.asset_id)
        if tables.desk_pauses.get(key) is not None:
            return False
        tables.desk_pauses[key] = pause
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def resume(
        self, client_id: str, asset_id: int, *, entry: AuditEntry | None = None
    ) -> bool:
        tables = self._unit.check_writable()
        key = (client_id, asset_id)
        if tables.desk_pauses.get(key) is None:
            return False
        tables.desk_pauses[key] = None  # a tombstone: dropped when the unit commits
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def get(self, client_id: str, asset_id: int) -> DeskPause | None:
        return self._unit.tables.desk_pauses.get((client_id, asset_id))

    async def of_client(self, client_id: str) -> list[DeskPause]:
        found = [
            p
            for p in self._unit.tables.desk_pauses.values()
            if p is not None and p.client_id == client_id
        ]
        return sorted(found, key=lambda p: p.asset_id)


class _Policies(PolicyStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    # -- policies ------------------------------------------------------------------------
    async def add_version(
        self,
        client_id: str,
        policy: Policy,
        *,
        set_at: datetime,
        effective_at: datetime,
        set_by: str,
        entry: AuditEntry | None = None,
    ) -> PolicyVersion:
        tables = self._unit.check_writable()
        number = max((v.version for v in await self.versions(client_id)), default=0) + 1
        version = PolicyVersion(client_id, number, policy, set_at, effective_at, set_by)
        tables.policy_versions[(client_id, number)] = version
        if entry is not None:
            await self._unit.audit.append(entry)
        return version

    async def versions(self, client_id: str) -> list[PolicyVersion]:
        found = [
            v
            for v in self._unit.tables.policy_versions.values()
            if v is not None and v.client_id == client_id
        ]
        return sorted(found, key=lambda v: v.version)

    async def cancel_version(
        self, client_id: str, version: int, now: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        tables = self._unit.check_writable()
        stored = tables.policy_versions.get((client_id, version))
        if stored is None or stored.effective_at <= now:
            return False
        tables.policy_versions[(client_id, version)] = None  # a tombstone
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    # -- the allowlist -------------------------------------------------------------------
    async def allow(self, item: AllowlistEntry, *, entry: AuditEntry | None = None) -> bool:
        tables = self._unit.check_writable()
        key = (item.client_id, item.chain.value, item.address, item.asset_id)
        if tables.allowlist.get(key) is not None:
            return False
        tables.allowlist[key] = item
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def disallow(
        self,
        client_id: str,
        chain: Chain,
        address: str,
        asset_id: int | None,
        *,
        entry: AuditEntry | None = None,
    ) -> bool:
        tables = self._unit.check_writable()
        key = (client_id, Chain(chain).value, address, asset_id)
        if tables.allowlist.get(key) is None:
            return False
        tables.allowlist[key] = None  # a tombstone
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def allowlist(self, client_id: str, chain: Chain | None = None) -> list[AllowlistEntry]:
        found = [
            e
            for e in self._unit.tables.allowlist.values()
            if e is not None and e.client_id == client_id and (chain is None or e.chain == chain)
        ]
        return sorted(found, key=_allowlist_order)

    # -- decisions and velocity ----------------------------------------------------------
    async def lock(self, client_id: str) -> None:
        self._unit.check_writable()  # write units are one at a time here

    async def count(self, usage: Usage) -> None:
        if not isinstance(usage.amount_units, int) or not isinstance(usage.at, datetime):
            raise TypeError("a count needs its amount in units and its time")
        self._unit.check_writable().policy_usage[(usage.client_id, usage.request_id)] = usage

    async def uncount(self, client_id: str, request_id: str) -> bool:
        usage = self._unit.check_writable().policy_usage
        if usage.get((client_id, request_id)) is None:
            return False
        usage[(client_id, request_id)] = None  # a tombstone
        return True

    async def used(
        self,
        client_id: str,
        since: datetime,
        *,
        wallet: WalletKind | None = None,
        user_id: str | None = None,
    ) -> list[Usage]:
        found = [
            u
            for u in self._unit.tables.policy_usage.values()
            if u is not None
            and u.client_id == client_id
            and u.at >= since
            and (wallet is None or u.wallet is wallet)
            and (user_id is None or u.user_id == user_id)
        ]
        return sorted(found, key=lambda u: (u.at, u.request_id))

    async def prune_usage(self, before: datetime, limit: int) -> int:
        usage = self._unit.check_writable().policy_usage
        old = [(u.at, key) for key, u in usage.items() if u is not None and u.at < before]
        old.sort()
        gone = old[: max(limit, 0)]
        for _, key in gone:
            usage[key] = None
        return len(gone)

    # -- approvals -----------------------------------------------------------------------
    async def add_approval(self, approval: Approval, *, entry: AuditEntry | None = None) -> bool:
        tables = self._unit.check_writable()
        if approval.id in tables.approvals or (
            await self.approval(approval.client_id, approval.request_id) is not None
        ):
            return False
        tables.approvals[approval.id] = approval
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def approval(self, client_id: str, request_id: str) -> Approval | None:
        for approval in self._unit.tables.approvals.values():
            if (approval.client_id, approval.request_id) == (client_id, request_id):
                return approval
        return None

    async def approval_by_id(self, approval_id: str) -> Approval | None:
        return self._unit.tables.approvals.get(approval_id)

    async def approvals(
        self,
        *,
        client_id: str | None = None,
        statuses: frozenset[ApprovalStatus] | None = None,
        limit: int = 100,
    ) -> list[Approval]:
        found = [
            a
            for a in self._unit.tables.approvals.values()
            if (client_id is None or a.client_id == client_id)
            and (statuses is None or a.status in statuses)
        ]
        found.sort(key=lambda a: (a.created_at, a.id), reverse=True)
        return found[: max(limit, 0)]

    async def due_approvals(self, now: datetime, limit: int) -> list[Approval]:
        found = [
            a
            for a in self._unit.tables.approvals.values()
            if a.status is ApprovalStatus.PENDING and a.expires_at <= now
        ]
        found.sort(key=lambda a: (a.expires_at, a.id))
        return found[: max(limit, 0)]

    async def move_approval(
        self, current: Approval, new: Approval, *, entry: AuditEntry | None = None
    ) -> bool:
        if (new.id, new.client_id, new.request_id) != (
            current.id,
            current.client_id,
            current.request_id,
        ):
            raise ValueError("an approval moves within its own transfer")
        tables = self._unit.check_writable()
        stored = tables.approvals.get(current.id)
        if stored is None or (stored.status, stored.approvers) != (
            current.status,
            current.approvers,
        ):
            return False
        tables.approvals[current.id] = replace(
            stored,
            status=new.status,
            approvers=tuple(new.approvers),
            required=new.required,
            expires_at=new.expires_at,
            decided_at=new.decided_at,
            reason=new.reason,
        )
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    # -- operators -----------------------------------------------------------------------
    async def add_operator(self, operator: Operator, *, entry: AuditEntry | None = None) -> bool:
        operators = self._unit.check_writable().operators
        if operator.name in operators:
            return False
        operators[operator.name] = operator
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def operator(self, name: str) -> Operator | None:
        return self._unit.tables.operators.get(name)

    async def operators(self) -> list[Operator]:
        return sorted(self._unit.tables.operators.values(), key=lambda o: o.name)

    async def disable_operator(
        self, name: str, at: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        operators = self._unit.check_writable().operators
        stored = operators.get(name)
        if stored is None or not stored.active:
            return False
        operators[name] = replace(stored, disabled_at=at)
        if entry is not None:
            await self._unit.audit.append(entry)
        return True


def _allowlist_order(entry: AllowlistEntry) -> tuple[str, str, bool, int]:
    """By chain, address, asset (the chain's every asset first): as the SQL store sorts."""
    return (entry.chain.value, entry.address, entry.asset_id is not None, entry.asset_id or 0)


class _Audit(AuditStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def append(self, entry: AuditEntry) -> None:
        self._unit.check_writable()
        [checked] = storable((entry,))
        if checked.event is not None:
            assert checked.client_id is not None  # `storable` checked it
            self._unit.publish(checked.client_id, checked.user_id, checked.event, checked.at)
        self._unit.pending_audit.append(checked)

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        entries = [*self._unit.committed_audit, *self._unit.pending_audit]
        return list(reversed(entries[-limit:])) if limit > 0 else []


class _Deposits(DepositStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def watchlist(self, chain: Chain) -> dict[str, Watched]:
        name = str(chain)
        return {
            address: whose
            for (on, address), whose in self._unit.tables.watched.items()
            if on == name
        }

    async def whose(self, chain: Chain, address: str) -> Watched | None:
        return self._unit.tables.watched.get((str(chain), address))

    async def cursor(self, chain: Chain) -> ScanCursor | None:
        return self._unit.tables.cursors.get(str(chain))

    async def advance(self, chain: Chain, expected: BlockRef | None, cursor: ScanCursor) -> bool:
        cursors = self._unit.check_writable().cursors
        stored = cursors.get(str(chain))
        if (None if stored is None else stored.block) != expected:
            return False
        cursors[str(chain)] = cursor
        return True

    async def add(self, deposit: Deposit, *, entry: AuditEntry | None = None) -> bool:
        deposits = self._unit.check_writable().deposits
        if deposit.key in deposits:
            return False
        if entry is not None:
            await self._unit.audit.append(entry)  # refuses an entry no store could keep
        deposits[deposit.key] = deposit
        return True

    async def get(self, chain: Chain, tx_hash: str, position: str) -> Deposit | None:
        return self._unit.tables.deposits.get((str(chain), tx_hash, position))

    async def move(
        self, current: Deposit, new: Deposit, *, entry: AuditEntry | None = None
    ) -> bool:
        deposits = self._unit.check_writable().deposits
        stored = deposits.get(current.key)
        if stored is None or (stored.status, stored.block) != (current.status, current.block):
            return False
        if entry is not None:
            await self._unit.audit.append(entry)
        deposits[current.key] = replace(
            stored,
            status=new.status,
            block=new.block,
            seen_at=new.seen_at,
            confirmed_at=new.confirmed_at,
            reversed_at=new.reversed_at,
        )
        return True

    async def unsettled(self, chain: Chain, limit: int) -> list[Deposit]:
        found = [
            d
            for d in self._unit.tables.deposits.values()
            if d.chain == chain and d.status is DepositStatus.SEEN
        ]
        found.sort(key=lambda d: (d.seen_at, d.tx_hash, d.position))
        return found[: max(limit, 0)]

    async def page(self, client_id: str, user_id: str | None, *, limit: int) -> list[Deposit]:
        found = [
            d
            for d in self._unit.tables.deposits.values()
            if d.client_id == client_id and (user_id is None or d.user_id == user_id)
        ]
        found.sort(key=lambda d: (d.seen_at, d.deposit_id), reverse=True)
        return found[: max(limit, 0)]


class _Events(EventStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def after(
        self,
        client_id: str,
        position: EventPosition | None,
        *,
        limit: int,
        user_id: str | None = None,
    ) -> EventPage:
        # A write unit reads the committed feed only: its own events are not placed yet
        # for a reader (as on PostgreSQL, where they are behind its open transaction).
        found = [
            e
            for e in self._unit.feed.events
            if e.client_id == client_id
            and (position is None or e.position > position)
            and (user_id is None or e.user_id == user_id)
            and e.position not in self._unit.pruned
        ]
        count = max(limit, 0)
        return EventPage(found[:count], more=len(found) > count)

    async def publish(
        self, client_id: str, user_id: str | None, note: EventNote, at: datetime
    ) -> None:
        self._unit.publish(client_id, user_id, note, at)

    async def has(self, client_id: str, position: EventPosition) -> bool:
        return any(
            e.position == position and e.client_id == client_id for e in self._unit.kept_events()
        )

    async def oldest(self, client_id: str) -> EventPosition | None:
        return min(
            (e.position for e in self._unit.kept_events() if e.client_id == client_id),
            default=None,
        )

    async def prune(self, before: datetime, limit: int) -> int:
        self._unit.check_writable()
        old = [e for e in self._unit.kept_events() if e.at < before]
        old.sort(key=lambda e: (e.at, e.position))
        gone = old[: max(limit, 0)]
        self._unit.pruned.update(e.position for e in gone)
        self._unit.pending_events = [
            e for e in self._unit.pending_events if e.position not in self._unit.pruned
        ]
        return len(gone)


class _Webhooks(WebhookStore):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def get(self, client_id: str) -> WebhookEndpoint | None:
        return self._unit.tables.webhooks.get(client_id)

    async def put(self, endpoint: WebhookEndpoint) -> None:
        webhooks = self._unit.check_writable().webhooks
        stored = webhooks.get(endpoint.client_id)
        if stored is not None:  # the delivery state is the job's, never the operator's
            endpoint = replace(
                stored,
                url=endpoint.url,
                secret=endpoint.secret,
                previous_secret=endpoint.previous_secret,
                previous_until=endpoint.previous_until,
                paused=endpoint.paused,
                disabled_reason=endpoint.disabled_reason,
                disabled_at=endpoint.disabled_at,
                updated_at=endpoint.updated_at,
            )
        webhooks[endpoint.client_id] = endpoint

    async def claim(
        self, now: datetime, *, owner: str, until: datetime, limit: int
    ) -> list[WebhookEndpoint]:
        webhooks = self._unit.check_writable().webhooks
        due = [e for e in webhooks.values() if e.due(now)]
        due.sort(key=lambda e: (e.next_attempt_at or now, e.client_id))
        claimed = [e.leased(owner, until) for e in due[: max(limit, 0)]]
        for endpoint in claimed:
            webhooks[endpoint.client_id] = endpoint
        return claimed

    async def advance(
        self, current: WebhookEndpoint, new: WebhookEndpoint
    ) -> WebhookEndpoint | None:
        webhooks = self._unit.check_writable().webhooks
        stored = webhooks.get(current.client_id)
        if stored is None or (stored.lease_owner, stored.cursor) != (
            current.lease_owner,
            current.cursor,
        ):
            return None
        moved = replace(
            stored,
            cursor=new.cursor,
            attempts=new.attempts,
            next_attempt_at=new.next_attempt_at,
            lease_owner=new.lease_owner,
            lease_until=new.lease_until,
        )
        if new.disabled:
            moved = replace(moved, disabled_reason=new.disabled_reason, disabled_at=new.disabled_at)
        webhooks[current.client_id] = moved
        return moved

    async def replay(self, client_id: str, cursor: EventPosition | None, now: datetime) -> bool:
        webhooks = self._unit.check_writable().webhooks
        stored = webhooks.get(client_id)
        if stored is None or stored.cursor is None:
            return False
        if cursor is not None and not stored.cursor > cursor:
            return False
        webhooks[client_id] = replace(
            stored,
            cursor=cursor,
            attempts=0,
            next_attempt_at=now,
            lease_owner=None,
            lease_until=None,
        )
        return True

    async def record(self, attempt: DeliveryAttempt) -> None:
        if not isinstance(attempt, DeliveryAttempt) or not isinstance(attempt.at, datetime):
            raise TypeError("a delivery attempt needs its time")
        self._unit.check_writable().webhook_attempts[next(_ATTEMPT_SERIALS)] = attempt

    async def attempts(
        self, client_id: str, *, event_id: str | None = None, limit: int
    ) -> list[DeliveryAttempt]:
        found = [
            (serial, a)
            for serial, a in self._unit.tables.webhook_attempts.items()
            if a is not None
            and a.client_id == client_id
            and (event_id is None or a.event_id == event_id)
        ]
        found.sort(key=lambda pair: (pair[1].at, pair[0]), reverse=True)
        return [a for _, a in found[: max(limit, 0)]]

    async def prune(self, before: datetime, limit: int) -> int:
        log = self._unit.check_writable().webhook_attempts
        old = [(a.at, serial) for serial, a in log.items() if a is not None and a.at < before]
        old.sort()
        gone = old[: max(limit, 0)]
        for _, serial in gone:
            log[serial] = None
        return len(gone)


class _Prices(PriceRecords):
    def __init__(self, unit: _Unit) -> None:
        self._unit = unit

    async def save(self, table: Mapping[tuple[str, Fiat], Decimal], at: datetime) -> None:
        prices = self._unit.check_writable().prices
        for (symbol, fiat), price in table.items():
            known = prices.get((symbol, fiat))
            if known is None or known[1] <= at:  # never back in time
                prices[(symbol, Fiat(fiat))] = (price, at)

    async def load(self) -> StoredPrices:
        return dict(self._unit.tables.prices)


class InMemoryStorage(Storage):
    """Everything in dicts; write units one at a time under one lock. Lost on restart."""

    def __init__(self) -> None:
        self._tables = _Tables()
        self._audit: list[AuditEntry] = []
        self._feed = _Feed()
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def __repr__(self) -> str:
        return f"InMemoryStorage({len(self._tables.clients)} clients)"

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: dicts in this process are always reachable."""

    @asynccontextmanager
    async def write(self) -> AsyncIterator[UnitOfWork]:
        async with self._writer():
            staged = _Tables(
                **{name: ChainMap({}, getattr(self._tables, name)) for name in _TABLES}
            )
            unit = _Unit(staged, self._audit, self._feed, writable=True)
            yield unit
            # Committed: every staged change at once, with no await in between.
            for name in _TABLES:
                layer: ChainMap[Any, Any] = getattr(staged, name)
                getattr(self._tables, name).update(layer.maps[0])
            self._tables.drop_tombstones()
            self._audit.extend(unit.pending_audit)
            feed = self._feed
            if unit.pruned:
                feed.events = [e for e in feed.events if e.position not in unit.pruned]
            feed.events.extend(unit.pending_events)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[UnitOfWork]:
        yield _Unit(self._tables, self._audit, self._feed, writable=False)

    async def swap_trade(self, expected: TradeStatus, trade: Trade, entry: AuditEntry) -> bool:
        async with self.write() as unit:
            return await unit.trades.swap(expected, trade, entry=entry)

    def _writer(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:  # a Lock serves one loop only
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]


def _wallet_key(wallet: WalletRecord) -> WalletKey:
    return (wallet.client_id, wallet.owner, wallet.user_id)


#: The store methods that only read: `autocommit` runs them in a read unit.
READS = frozenset(
    {
        "get",
        "all",
        "get_user",
        "created_by_request",
        "page",
        "lapsed",
        "newest",
        "in_flight",
        "load",
        "watchlist",
        "cursor",
        "unsettled",
        "after",
        "has",
        "oldest",
        "attempts",
        "spending",
        "of_trades",
        "held",
        "due",
        "listing",
        "of_client",
        "versions",
        "allowlist",
        "used",
        "approval",
        "approval_by_id",
        "approvals",
        "operator",
        "operators",
    }
)


class autocommit:
    """Each store call in a unit of its own (a read unit for `READS`, else a write unit):
    for seeding and checking state in tests.

        await autocommit(storage).clients.add(client)
        trade = await autocommit(storage).trades.get(client_id, user_id, trade_id)

    A use case never does this: its change and its audit entry share one unit.
    """

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    @property
    def clients(self) -> Any:
        return _Calls(self._storage, "clients")

    @property
    def wallets(self) -> Any:
        return _Calls(self._storage, "wallets")

    @property
    def trades(self) -> Any:
        return _Calls(self._storage, "trades")

    @property
    def sends(self) -> Any:
        return _Calls(self._storage, "sends")

    @property
    def audit(self) -> Any:
        return _Calls(self._storage, "audit")

    @property
    def deposits(self) -> Any:
        return _Calls(self._storage, "deposits")

    @property
    def events(self) -> Any:
        return _Calls(self._storage, "events")

    @property
    def prices(self) -> Any:
        return _Calls(self._storage, "prices")

    @property
    def webhooks(self) -> Any:
        return _Calls(self._storage, "webhooks")

    @property
    def settlements(self) -> Any:
        return _Calls(self._storage, "settlements")

    @property
    def desk_pauses(self) -> Any:
        return _Calls(self._storage, "desk_pauses")

    @property
    def policies(self) -> Any:
        return _Calls(self._storage, "policies")


class _Calls:
    def __init__(self, storage: Storage, store: str) -> None:
        self._storage = storage
        self._store = store

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            unit_of = self._storage.read if method in READS else self._storage.write
            async with unit_of() as unit:
                return await getattr(getattr(unit, self._store), method)(*args, **kwargs)

        return call


def build(**_: Any) -> InMemoryStorage:
    """Entry point `walletcore.repos: memory` (its leases: `walletcore.nonce_leases: memory`)."""
    return InMemoryStorage()


__all__ = ["READS", "InMemoryStorage", "autocommit", "build"]
