"""A JSON-file Repo for the sandbox profile: durable, shared by every process on one machine.

Why it exists: the operator CLI and `walletcore serve` (with any number of workers) are
separate processes; an api client created by the CLI must authenticate against a running
server at once. The in-memory repo cannot do that. The SQL repo replaces this adapter; until
then this is the sandbox default (`WALLETCORE_REPO=file`, files under `WALLETCORE_HOME`).

How it stays correct across processes (stdlib only):
- every change is a read-modify-write under an exclusive `fcntl.flock` on a lock file beside
  the data, so two processes cannot lose each other's updates; `swap_trade` is a real
  compare-and-set because the read happens under that lock;
- the data file is replaced atomically (temp file, fsync, `os.replace`, fsync of the folder),
  so a reader never sees half a file;
- every operation re-reads the file when it changed. A change is detected by `stat`
  (inode, mtime in ns, size): each write sets the new file's mtime strictly above the old
  one's, so two versions never share a key and the cheap check is exact;
- the audit log is an append-only JSON-lines file beside it (one fsync'd line per entry),
  so auditing does not rewrite the data file.

Values on disk: Decimals as strings, datetimes ISO 8601 (full precision, round-trips),
bytes base64, enums by value, datetimes in UTC. It is a sandbox store: one file, rewritten whole on every
change, fine for thousands of records, not for production (the production profile refuses it).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import fcntl
import json
import os
import tempfile
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import Repo

FORMAT = "walletcore-sandbox-repo"
VERSION = 1
DATA_FILE = "sandbox-repo.json"
AUDIT_FILE = "sandbox-audit.jsonl"

T = TypeVar("T")
WalletKey = tuple[str, WalletOwner, str | None]
SendKey = tuple[str, str]


class FileRepoError(RuntimeError):
    """The sandbox data file cannot be used (corrupt, foreign, or of a newer format)."""


# -- codec: frozen domain dataclasses <-> JSON values ---------------------------------------
def encode(value: Any) -> Any:
    """A JSON-ready value: dataclasses as objects, enums by value, Decimals as strings."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, Enum):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        # Kept as UTC, like a database would; the same instant reads back.
        return (value.astimezone(UTC) if value.tzinfo is not None else value).isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(encode(k)): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    raise TypeError(f"cannot store a {type(value).__name__}")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def decode(hint: Any, value: Any) -> Any:
    """The inverse of `encode`, driven by the type hint of the field being read."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        concrete = [a for a in args if a is not type(None)]
        if len(concrete) == 1:
            return decode(concrete[0], value)
        return value  # an untyped union: stored as it came
    if hint is Any or hint is object:
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        kwargs = {
            f.name: decode(hints[f.name], value[f.name])
            for f in dataclasses.fields(hint)
            if f.name in value
        }
        return hint(**kwargs)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if hint is Decimal:
        return Decimal(value)
    if hint is datetime:
        return datetime.fromisoformat(value)
    if hint is bytes:
        return base64.b64decode(value)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        key_hint, value_hint = typing.get_args(hint) or (Any, Any)
        return {_decode_key(key_hint, k): decode(value_hint, v) for k, v in value.items()}
    if origin in (tuple, list):
        args = typing.get_args(hint)
        item = args[0] if args else Any
        items = [decode(item, v) for v in value]
        return tuple(items) if origin is tuple else items
    return value


def _decode_key(hint: Any, key: str) -> Any:
    if hint is int:
        return int(key)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(key)
    return key


# -- the in-memory picture of one version of the file -----------------------------------------
@dataclass(frozen=True, slots=True)
class _State:
    clients: dict[str, ApiClient] = field(default_factory=dict)
    users: dict[tuple[str, str], User] = field(default_factory=dict)
    wallets: dict[WalletKey, WalletRecord] = field(default_factory=dict)
    trades: dict[str, Trade] = field(default_factory=dict)
    sends: dict[SendKey, SendRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "clients": [encode(c) for c in self.clients.values()],
            "users": [encode(u) for u in self.users.values()],
            "wallets": [encode(w) for w in self.wallets.values()],
            "trades": [encode(t) for t in self.trades.values()],
            "sends": [encode(r) for r in self.sends.values()],
        }

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
        return cls(
            clients={c.client_id: c for c in clients},
            users={(u.client_id, u.user_id): u for u in users},
            wallets={_wallet_key(w): w for w in wallets},
            trades={t.trade_id: t for t in trades},
            sends={(r.client_id, r.request_id): r for r in sends},
        )


_Key = tuple[int, int, int]  # (inode, mtime_ns, size) of one version of the data file


class FileRepo(Repo):
    """The Repo contract of `InMemoryRepo`, kept in `home/sandbox-repo.json`.

    Reads are served from a cache that a `stat` validates; writes run in a worker thread
    (they lock, fsync and rename) so the event loop is not blocked by another process
    holding the lock.
    """

    def __init__(self, path: Path, audit_path: Path | None = None) -> None:
        self._path = Path(path)
        self._audit_path = Path(audit_path) if audit_path else self._path.with_name(AUDIT_FILE)
        self._lock_path = self._path.with_name(self._path.name + ".lock")
        self._thread_lock = threading.Lock()
        self._cache: tuple[_Key, _State] | None = None
        self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)

    def __repr__(self) -> str:
        return f"FileRepo({str(self._path)!r})"

    # -- api clients ----------------------------------------------------------------------
    async def add_client(self, client: ApiClient) -> None:
        client = _stored(client)

        def change(state: _State) -> tuple[_State, None]:
            if client.client_id in state.clients:
                raise InvalidRequest("api client exists already")
            return _replace(state, clients={**state.clients, client.client_id: client}), None

        await self._mutate(change)

    async def get_client(self, client_id: str) -> ApiClient | None:
        return self._read().clients.get(client_id)

    async def list_clients(self) -> list[ApiClient]:
        return list(self._read().clients.values())

    async def update_client(self, client: ApiClient) -> None:
        client = _stored(client)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, clients={**state.clients, client.client_id: client}), None

        await self._mutate(change)

    # -- users and wallets ----------------------------------------------------------------
    async def add_user_wallet(self, user: User, wallet: WalletRecord) -> None:
        user, wallet = _stored(user), _stored(wallet)

        def change(state: _State) -> tuple[_State, None]:
            return (
                _replace(
                    state,
                    users={**state.users, (user.client_id, user.user_id): user},
                    wallets={**state.wallets, _wallet_key(wallet): wallet},
                ),
                None,
            )

        await self._mutate(change)

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        return self._read().users.get((client_id, user_id))

    async def add_wallet(self, wallet: WalletRecord) -> bool:
        wallet = _stored(wallet)

        def change(state: _State) -> tuple[_State | None, bool]:
            key = _wallet_key(wallet)
            if key in state.wallets:
                return None, False
            return _replace(state, wallets={**state.wallets, key: wallet}), True

        return await self._mutate(change)

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        return self._read().wallets.get((client_id, owner, user_id))

    async def update_wallet(self, wallet: WalletRecord) -> None:
        wallet = _stored(wallet)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, wallets={**state.wallets, _wallet_key(wallet): wallet}), None

        await self._mutate(change)

    # -- trades ---------------------------------------------------------------------------
    async def add_trade(self, trade: Trade) -> None:
        trade = _stored(trade)

        def change(state: _State) -> tuple[_State, None]:
            return _replace(state, trades={**state.trades, trade.trade_id: trade}), None

        await self._mutate(change)

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

    async def swap_trade(self, expected: TradeStatus, trade: Trade) -> bool:
        trade = _stored(trade)

        def change(state: _State) -> tuple[_State | None, bool]:
            stored = state.trades.get(trade.trade_id)
            if stored is None or stored.status is not expected:
                return None, False
            return _replace(state, trades={**state.trades, trade.trade_id: trade}), True

        return await self._mutate(change)

    async def expire_lapsed(self, client_id: str, user_id: str, now: datetime) -> int:
        def change(state: _State) -> tuple[_State | None, int]:
            expired = {
                trade_id: _stored(t.expire(now))
                for trade_id, t in state.trades.items()
                if t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now)
            }
            if not expired:
                return None, 0
            return _replace(state, trades={**state.trades, **expired}), len(expired)

        # Most calls find nothing to expire: decide that from the cache, without the lock.
        if not any(
            t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now)
            for t in self._read().trades.values()
        ):
            return 0
        return await self._mutate(change)

    # -- sends: the idempotency record ---------------------------------------------------
    async def begin_send(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        def change(state: _State) -> tuple[_State, SendRecord]:
            stored = state.sends.get((client_id, request_id))
            if stored is None:
                record = SendRecord.start(client_id, request_id, fingerprint, now, lease)
            else:
                record = stored.claim(fingerprint, now, lease)  # raises 409 / 422
            record = _stored(record)
            return _replace(state, sends={**state.sends, (client_id, request_id): record}), record

        return await self._mutate(change)

    async def advance_send(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        new = _stored(new)
        key = (current.client_id, current.request_id)

        def change(state: _State) -> tuple[_State | None, bool]:
            stored = state.sends.get(key)
            if stored is None or (stored.state, stored.attempt) != (current.state, current.attempt):
                return None, False
            return _replace(state, sends={**state.sends, key: new}), True

        return await self._mutate(change)

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None:
        return self._read().sends.get((client_id, request_id))

    # -- audit ----------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        line = json.dumps(encode(entry), separators=(",", ":")) + "\n"
        await asyncio.to_thread(self._append_audit_line, line.encode("utf-8"))

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        try:
            lines = self._audit_path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        entries = [decode(AuditEntry, json.loads(line)) for line in lines[-limit:] if line.strip()]
        return list(reversed(entries))

    # -- the file -------------------------------------------------------------------------
    def _read(self) -> _State:
        """The current state, re-read only when the file changed since the cached version."""
        key = self._stat_key()
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1]
        with self._thread_lock:
            return self._load()

    def _load(self) -> _State:
        """Re-read the file if it changed (caller holds the thread lock)."""
        for _ in range(5):
            key = self._stat_key()
            cached = self._cache
            if cached is not None and cached[0] == key:
                return cached[1]
            if key == (0, 0, 0):
                state = _State()
            else:
                try:
                    raw = self._path.read_bytes()
                except FileNotFoundError:  # replaced between stat and open: look again
                    continue
                try:
                    state = _State.from_json(json.loads(raw), self._path)
                except FileRepoError:
                    raise
                except (ValueError, KeyError, TypeError) as exc:
                    raise FileRepoError(f"{self._path} is corrupt: {type(exc).__name__}") from None
            # Trust the version only if the file did not change while it was read.
            if self._stat_key() == key:
                self._cache = (key, state)
            return state
        raise FileRepoError(f"{self._path} keeps changing; cannot read a stable version")

    def _stat_key(self) -> _Key:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    async def _mutate(self, change: Callable[[_State], tuple[_State | None, T]]) -> T:
        return await asyncio.to_thread(self._mutate_locked, change)

    def _mutate_locked(self, change: Callable[[_State], tuple[_State | None, T]]) -> T:
        with self._thread_lock, self._file_lock():
            current = self._load()
            new_state, result = change(current)
            if new_state is not None:
                self._write(new_state)
            return result

    def _file_lock(self) -> _FileLock:
        return _FileLock(self._lock_path)

    def _write(self, state: _State) -> None:
        """Replace the data file atomically, its mtime strictly above the old one's."""
        previous = self._stat_key()
        data = json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8")
        folder = self._path.parent
        fd, tmp_name = tempfile.mkstemp(prefix=self._path.name + ".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp_name, 0o600)
            stamp = max(time.time_ns(), previous[1] + 1)
            os.utime(tmp_name, ns=(stamp, stamp))
            # A filesystem with coarse timestamps rounds the stamp: step until it is above.
            while os.stat(tmp_name).st_mtime_ns <= previous[1]:
                stamp += 1_000_000
                os.utime(tmp_name, ns=(stamp, stamp))
            os.replace(tmp_name, self._path)
        except BaseException:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
            raise
        _fsync_dir(folder)
        self._cache = (self._stat_key(), state)

    def _append_audit_line(self, line: bytes) -> None:
        with self._file_lock():
            fd = os.open(self._audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)


class _FileLock:
    """An exclusive `flock` on a lock file, held for one read-modify-write."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> None:
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *_: object) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    return FileRepo(Path(settings.home) / DATA_FILE)


__all__ = ["FileRepo", "FileRepoError", "build"]
