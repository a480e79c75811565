"""A JSON-file Repo for the sandbox profile: durable, shared by every process on one machine.

Why it exists: the operator CLI and `walletcore serve` (with any number of workers) are
separate processes; an api client created by the CLI must authenticate against a running
server at once. The in-memory repo cannot do that. The SQL repo replaces this adapter; until
then this is the sandbox default (`WALLETCORE_REPO=file`, files under `WALLETCORE_HOME`).

How it stays correct across processes: the data is one `JsonFile`
(`walletcore.sandbox.jsonstore`): every change a read-modify-write under an exclusive
`flock`, the file replaced atomically, reads cached and validated by `stat`; so two processes
cannot lose each other's updates and `swap_trade` is a real compare-and-set. Nonce leases:
a `flock`ed file per address in `sandbox-nonce-locks/`, the floors in
`sandbox-nonce-floors.json` (`walletcore.sandbox.nonceleases`).

The audit log is an append-only JSON-lines file beside the data (`sandbox-audit.jsonl`), so
auditing does not rewrite the data file. An entry carried by a change is written with it
all the same (a redo log): the new data file holds the change's entries as JSON lines and
the size the log had when they were made (`auditPending`); once the data file is in place,
the lines are appended at that offset, still under the lock. A process killed in between
leaves them in the data file: the next writer (or reader of the log), under the lock, finds
them missing or torn at their offset and appends them. The data file is the commit point,
so an entry is in the log if and only if its change is. Entries that record no change
(`append_audit`) are appended on their own.

Values on disk: Decimals as strings, datetimes ISO 8601 (full precision, round-trips),
bytes base64, enums by value, datetimes in UTC. It is a sandbox store: one file, rewritten whole on every
change, fine for thousands of records, not for production (the production profile refuses it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from walletcore.domain.audit import AuditEntry, storable
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import AuditEntries, NonceLeases, Repo
from walletcore.sandbox.jsonstore import JsonFile, JsonStoreError, decode, encode
from walletcore.sandbox.nonceleases import WAIT_SECONDS, FlockNonceLeases, JsonFloors

FORMAT = "walletcore-sandbox-repo"
VERSION = 1
DATA_FILE = "sandbox-repo.json"
AUDIT_FILE = "sandbox-audit.jsonl"
NONCE_FLOORS_FILE = "sandbox-nonce-floors.json"
NONCE_LOCKS_DIR = "sandbox-nonce-locks"

T = TypeVar("T")
WalletKey = tuple[str, WalletOwner, str | None]
SendKey = tuple[str, str]
#: (client id, X-Request-Id) of a `/create`
CreationKey = tuple[str, str]
#: The audit entries a change carries: given, or computed once the change is known.
Carried = AuditEntries | Callable[[], AuditEntries]

log = logging.getLogger("walletcore.sandbox.filerepo")


class FileRepoError(JsonStoreError):
    """The sandbox data file cannot be used (corrupt, foreign, or of a newer format)."""


# -- the in-memory picture of one version of the file -----------------------------------------
@dataclass(frozen=True, slots=True)
class _PendingAudit:
    """The audit lines the last change carried, and where in the log they belong."""

    offset: int
    lines: str


@dataclass(frozen=True, slots=True)
class _State:
    clients: dict[str, ApiClient] = field(default_factory=dict)
    users: dict[tuple[str, str], User] = field(default_factory=dict)
    wallets: dict[WalletKey, WalletRecord] = field(default_factory=dict)
    trades: dict[str, Trade] = field(default_factory=dict)
    sends: dict[SendKey, SendRecord] = field(default_factory=dict)
    creations: dict[CreationKey, str] = field(default_factory=dict)
    audit_pending: _PendingAudit | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "clients": [encode(c) for c in self.clients.values()],
            "users": [encode(u) for u in self.users.values()],
            "wallets": [encode(w) for w in self.wallets.values()],
            "trades": [encode(t) for t in self.trades.values()],
            "sends": [encode(r) for r in self.sends.values()],
            "creations": [
                {"clientId": c, "requestId": r, "userId": u} for (c, r), u in self.creations.items()
            ],
        }
        if self.audit_pending is not None:
            data["auditPending"] = encode(self.audit_pending)
        return data

    @classmethod
    def from_json(cls, data: Any, path: Path) -> _State:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise FileRepoError(f"{path} is not a walletcore sandbox repo file")
        if data.get("version") != VERSION:
            raise FileRepoError(
                f"{path} has format version {data.get('version')!r}; this walletcore reads {VERSION}"
            )
        clients = [decode(ApiClient, c) for c in data.get("clients", [])]
        users = [decode(User, u) for u in data.get("users", [])]
        wallets = [decode(WalletRecord, w) for w in data.get("wallets", [])]
        trades = [decode(Trade, t) for t in data.get("trades", [])]
        sends = [decode(SendRecord, r) for r in data.get("sends", [])]
        pending = data.get("auditPending")
        return cls(
            clients={c.client_id: c for c in clients},
            users={(u.client_id, u.user_id): u for u in users},
            wallets={_wallet_key(w): w for w in wallets},
            trades={t.trade_id: t for t in trades},
            sends={(r.client_id, r.request_id): r for r in sends},
            creations={
                (str(c["clientId"]), str(c["requestId"])): str(c["userId"])
                for c in data.get("creations", [])
            },
            audit_pending=None if pending is None else decode(_PendingAudit, pending),
        )


class FileRepo(Repo):
    """The Repo contract of `InMemoryRepo`, kept in `home/sandbox-repo.json`.

    Reads are served from a cache that a `stat` validates; writes run in a worker thread
    (they lock, fsync and rename) so the event loop is not blocked by another process
    holding the lock.
    """

    def __init__(
        self, path: Path, audit_path: Path | None = None, *, nonce_wait: float = WAIT_SECONDS
    ) -> None:
        self._path = Path(path)
        self._audit_path = Path(audit_path) if audit_path else self._path.with_name(AUDIT_FILE)
        self._file: JsonFile[_State] = JsonFile(
            self._path,
            load=_State.from_json,
            dump=_State.to_json,
            empty=_State,
            error=FileRepoError,
        )
        self._nonce_leases = FlockNonceLeases(
            self._path.with_name(NONCE_LOCKS_DIR),
            JsonFloors(self._path.with_name(NONCE_FLOORS_FILE)),
            wait=nonce_wait,
        )

    def __repr__(self) -> str:
        return f"FileRepo({str(self._path)!r})"

    # -- api clients ----------------------------------------------------------------------
    async def add_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        client = _stored(client)

        def change(state: _State) -> tuple[_State, None]:
            if client.client_id in state.clients:
                raise InvalidRequest("api client exists already")
            return _replace(state, clients={**state.clients, client.client_id: client}), None

        await self._mutate(change, audit)

    async def get_client(self, client_id: str) -> ApiClient | None:
        return self._read().clients.get(client_id)

    async def list_clients(self) -> list[ApiClient]:
        return list(self._read().clients.values())

    async def update_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        client = _stored(client)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, clients={**state.clients, client.client_id: client}), None

        await self._mutate(change, audit)

    # -- users and wallets ----------------------------------------------------------------
    async def add_user_wallet(
        self,
        user: User,
        wallet: WalletRecord,
        *,
        request_id: str | None = None,
        audit: AuditEntries = (),
    ) -> bool:
        user, wallet = _stored(user), _stored(wallet)

        def change(state: _State) -> tuple[_State | None, bool]:
            creations = state.creations
            if request_id is not None:
                if (user.client_id, request_id) in creations:
                    return None, False
                creations = {**creations, (user.client_id, request_id): user.user_id}
            return (
                _replace(
                    state,
                    users={**state.users, (user.client_id, user.user_id): user},
                    wallets={**state.wallets, _wallet_key(wallet): wallet},
                    creations=creations,
                ),
                True,
            )

        return await self._mutate(change, audit)

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        return self._read().creations.get((client_id, request_id))

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        return self._read().users.get((client_id, user_id))

    async def add_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> bool:
        wallet = _stored(wallet)

        def change(state: _State) -> tuple[_State | None, bool]:
            key = _wallet_key(wallet)
            if key in state.wallets:
                return None, False
            return _replace(state, wallets={**state.wallets, key: wallet}), True

        return await self._mutate(change, audit)

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        return self._read().wallets.get((client_id, owner, user_id))

    async def update_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> None:
        wallet = _stored(wallet)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, wallets={**state.wallets, _wallet_key(wallet): wallet}), None

        await self._mutate(change, audit)

    # -- trades ---------------------------------------------------------------------------
    async def add_trade(self, trade: Trade, *, audit: AuditEntries = ()) -> None:
        trade = _stored(trade)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, trades={**state.trades, trade.trade_id: trade}), None

        await self._mutate(change, audit)

    async def get_trade(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        trade = self._read().trades.get(trade_id)
        if trade is None or trade.client_id != client_id or trade.user_id != user_id:
            return None
        return trade

    async def list_trades(
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
            for t in self._read().trades.values()
            if t.client_id == client_id
            and t.user_id == user_id
            and (side is None or t.side is side)
            and (status is None or t.status is status)
        ]
        mine.sort(key=lambda t: (t.created_at, t.trade_id), reverse=True)
        return mine[:limit]

    async def swap_trade(
        self, expected: TradeStatus, trade: Trade, *, audit: AuditEntries = ()
    ) -> bool:
        trade = _stored(trade)

        def change(state: _State) -> tuple[_State | None, bool]:
            stored = state.trades.get(trade.trade_id)
            if stored is None or stored.status is not expected:
                return None, False
            return _replace(state, trades={**state.trades, trade.trade_id: trade}), True

        # A loser decided from the cache needs neither the lock nor a write.
        cached = self._read().trades.get(trade.trade_id)
        if cached is None or cached.status is not expected:
            return False
        return await self._mutate(change, audit)

    async def expire_lapsed(
        self, client_id: str, user_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> int:
        expired: dict[str, Trade] = {}

        def change(state: _State) -> tuple[_State | None, int]:
            expired.update(
                (trade_id, _stored(t.expire(now)))
                for trade_id, t in state.trades.items()
                if t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now)
            )
            if not expired:
                return None, 0
            return _replace(state, trades={**state.trades, **expired}), len(expired)

        def entries() -> AuditEntries:
            if audit is None:
                return ()
            return [dataclasses.replace(audit, target=trade_id) for trade_id in expired]

        # Most calls find nothing to expire: decide that from the cache, without the lock.
        if not any(
            t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now)
            for t in self._read().trades.values()
        ):
            return 0
        return await self._mutate(change, entries)

    # -- sends: the idempotency record ---------------------------------------------------
    async def begin_send(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
        audit: AuditEntries = (),
    ) -> SendRecord:
        def change(state: _State) -> tuple[_State | None, SendRecord]:
            stored = state.sends.get((client_id, request_id))
            if stored is None:
                record = SendRecord.start(client_id, request_id, fingerprint, now, lease)
            else:
                record = stored.claim(fingerprint, now, lease)  # raises 409 / 422
                if record is stored:  # finished: replayed as it is, nothing to write
                    return None, record
            record = _stored(record)
            return _replace(state, sends={**state.sends, (client_id, request_id): record}), record

        return await self._mutate(change, audit)

    async def advance_send(
        self, current: SendRecord, new: SendRecord, *, audit: AuditEntries = ()
    ) -> bool:
        current.require_successor(new)
        new = _stored(new)
        key = (current.client_id, current.request_id)

        def change(state: _State) -> tuple[_State | None, bool]:
            stored = state.sends.get(key)
            if stored is None or (stored.state, stored.attempt) != (current.state, current.attempt):
                return None, False
            return _replace(state, sends={**state.sends, key: new}), True

        return await self._mutate(change, audit)

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None:
        return self._read().sends.get((client_id, request_id))

    # -- audit ----------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        data = _audit_lines((entry,)).encode("utf-8")

        def work(state: _State) -> None:
            self._redo(state)
            self._log_end()
            self._append(data)

        await asyncio.to_thread(self._file.locked_now, work)

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        def work(state: _State) -> bytes:
            self._redo(state)
            try:
                return self._audit_path.read_bytes()
            except FileNotFoundError:
                return b""

        lines = (await asyncio.to_thread(self._file.locked_now, work)).splitlines()
        entries: list[AuditEntry] = []
        for line in reversed(lines):
            if len(entries) >= max(limit, 0):
                break
            if not line.strip():
                continue
            try:
                entries.append(decode(AuditEntry, json.loads(line)))
            except (ValueError, KeyError, TypeError):  # a line torn by a crash mid-append
                log.warning("skipping an unreadable line of %s", self._audit_path)
        return entries

    # -- nonces ---------------------------------------------------------------------------
    def nonce_leases(self) -> NonceLeases:
        return self._nonce_leases

    # -- the file -------------------------------------------------------------------------
    def _read(self) -> _State:
        return self._file.read()

    async def _mutate(
        self, change: Callable[[_State], tuple[_State | None, T]], audit: Carried = ()
    ) -> T:
        """`change` under the lock; a new state is written with the audit lines it carries,
        which are appended to the log once the data file is in place."""

        def carrying(state: _State) -> tuple[_State | None, T]:
            self._redo(state)  # the last change's lines are in the log before anything else
            new_state, result = change(state)
            if new_state is None:
                return None, result
            lines = _audit_lines(audit() if callable(audit) else audit)
            pending = _PendingAudit(self._log_end(), lines) if lines else None
            return _replace(new_state, audit_pending=pending), result

        def after(state: _State) -> None:
            if state.audit_pending is not None:
                self._append(state.audit_pending.lines.encode("utf-8"))

        return await self._file.mutate(carrying, after)

    # -- the audit log (called under the lock) ------------------------------------------
    def _audit_size(self) -> int:
        try:
            return os.stat(self._audit_path).st_size
        except FileNotFoundError:
            return 0

    def _log_end(self) -> int:
        """Where the next line starts: the log's size, after ending a line torn by a crash
        mid-append (so the torn line stays one unreadable line, and the next is whole)."""
        size = self._audit_size()
        if size:
            with open(self._audit_path, "rb") as handle:
                handle.seek(size - 1)
                last = handle.read(1)
            if last != b"\n":
                self._append(b"\n")
                size += 1
        return size

    def _append(self, data: bytes) -> None:
        fd = os.open(self._audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _redo(self, state: _State) -> None:
        """Make sure the lines of the last committed change are in the log at their offset:
        a process killed between its data write and its append left them out (or torn)."""
        pending = state.audit_pending
        if pending is None:
            return
        data = pending.lines.encode("utf-8")
        size = self._audit_size()
        if size < pending.offset:  # the log was cut or replaced since: nothing to check
            log.warning("%s is shorter than the data file expects", self._audit_path)
            return
        if size > pending.offset:
            with open(self._audit_path, "rb") as handle:
                handle.seek(pending.offset)
                found = handle.read(len(data))
            if found == data:
                return  # the usual case: appended right after the data write
            if size == pending.offset + len(found) and data.startswith(found):
                os.truncate(self._audit_path, pending.offset)  # torn by a crash: redo it
            else:
                log.warning("audit lines of the last change not at their offset; appending")
                self._log_end()
        self._append(data)


def _audit_lines(entries: Sequence[AuditEntry]) -> str:
    """JSON lines of `entries` (a `TypeError` for anything the log cannot hold)."""
    return "".join(json.dumps(encode(e), separators=(",", ":")) + "\n" for e in storable(entries))


def _stored(record: T) -> T:
    """The record as the file keeps it (UTC datetimes...), so this process reads what
    another one would."""
    stored: T = decode(type(record), encode(record))
    return stored


def _replace(state: _State, **changes: Any) -> _State:
    return dataclasses.replace(state, **changes)


def _wallet_key(wallet: WalletRecord) -> WalletKey:
    return (wallet.client_id, wallet.owner, wallet.user_id)


def build(*, settings: Any, **_: Any) -> FileRepo:
    """Entry point `walletcore.repos: file`: `WALLETCORE_HOME/sandbox-repo.json`."""
    if str(getattr(settings, "profile", "sandbox")) != "sandbox":
        raise FileRepoError(
            "WALLETCORE_REPO=file is a sandbox adapter; the production profile refuses it"
        )
    return FileRepo(
        Path(settings.home) / DATA_FILE,
        nonce_wait=float(getattr(settings, "nonce_wait_seconds", WAIT_SECONDS)),
    )


__all__ = ["FileRepo", "FileRepoError", "build"]
