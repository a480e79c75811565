"""A JSON-file Repo for the sandbox profile: durable, shared by every process on one machine.

Why it exists: the operator CLI and `walletcore serve` (with any number of workers) are
separate processes; an api client created by the CLI must authenticate against a running
server at once. The in-memory repo cannot do that. The SQL repo replaces this adapter; until
then this is the sandbox default (`WALLETCORE_REPO=file`, files under `WALLETCORE_HOME`).

How it stays correct across processes: the data is one `JsonFile`
(`walletcore.sandbox.jsonstore`): every change a read-modify-write under an exclusive
`flock`, the file replaced atomically, reads cached and validated by `stat`; so two processes
cannot lose each other's updates and `swap_trade` is a real compare-and-set. The audit log
is an append-only JSON-lines file beside it (one fsync'd line per entry), so auditing does
not rewrite the data file. Nonce leases: a `flock`ed file per address in
`sandbox-nonce-locks/`, the floors in `sandbox-nonce-floors.json`
(`walletcore.sandbox.nonceleases`).

Values on disk: Decimals as strings, datetimes ISO 8601 (full precision, round-trips),
bytes base64, enums by value, datetimes in UTC. It is a sandbox store: one file, rewritten whole on every
change, fine for thousands of records, not for production (the production profile refuses it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import NonceLeases, Repo
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


class FileRepoError(JsonStoreError):
    """The sandbox data file cannot be used (corrupt, foreign, or of a newer format)."""


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

    # -- nonces ---------------------------------------------------------------------------
    def nonce_leases(self) -> NonceLeases:
        return self._nonce_leases

    # -- the file -------------------------------------------------------------------------
    def _read(self) -> _State:
        return self._file.read()

    async def _mutate(self, change: Callable[[_State], tuple[_State | None, T]]) -> T:
        return await self._file.mutate(change)

    def _append_audit_line(self, line: bytes) -> None:
        self._file.append_line(self._audit_path, line)


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
