"""An in-memory Repo: the reference implementation of the Repo contract.

Each method is one critical section under one lock: the change and the audit entries it
carries are applied together, or (a lost compare-and-set, a refusal) neither is.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta
from typing import Any

from walletcore.domain.audit import AuditEntry, storable
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import AuditEntries, NonceLeases, Repo
from walletcore.sandbox.nonceleases import LocalNonceLeases

WalletKey = tuple[str, WalletOwner, str | None]


class InMemoryRepo(Repo):
    """Everything in dicts, each method atomic under one lock. Lost on restart."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._clients: dict[str, ApiClient] = {}
        self._users: dict[tuple[str, str], User] = {}
        self._wallets: dict[WalletKey, WalletRecord] = {}
        self._trades: dict[str, Trade] = {}
        self._audit: list[AuditEntry] = []
        self._sends: dict[tuple[str, str], SendRecord] = {}
        #: (client id, X-Request-Id) -> the user `/create` made for it
        self._creations: dict[tuple[str, str], str] = {}
        self._nonce_leases = LocalNonceLeases()

    # api clients
    async def add_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        entries = storable(audit)
        async with self._lock:
            if client.client_id in self._clients:
                raise InvalidRequest("api client exists already")
            self._clients[client.client_id] = client
            self._audit.extend(entries)

    async def get_client(self, client_id: str) -> ApiClient | None:
        return self._clients.get(client_id)

    async def list_clients(self) -> list[ApiClient]:
        return list(self._clients.values())

    async def update_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        entries = storable(audit)
        async with self._lock:
            self._clients[client.client_id] = client
            self._audit.extend(entries)

    # users and wallets
    async def add_user_wallet(
        self,
        user: User,
        wallet: WalletRecord,
        *,
        request_id: str | None = None,
        audit: AuditEntries = (),
    ) -> bool:
        entries = storable(audit)
        async with self._lock:
            if request_id is not None:
                if (user.client_id, request_id) in self._creations:
                    return False
                self._creations[(user.client_id, request_id)] = user.user_id
            self._users[(user.client_id, user.user_id)] = user
            self._wallets[_wallet_key(wallet)] = wallet
            self._audit.extend(entries)
            return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        return self._creations.get((client_id, request_id))

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        return self._users.get((client_id, user_id))

    async def add_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> bool:
        entries = storable(audit)
        async with self._lock:
            key = _wallet_key(wallet)
            if key in self._wallets:
                return False
            self._wallets[key] = wallet
            self._audit.extend(entries)
            return True

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        return self._wallets.get((client_id, owner, user_id))

    async def update_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> None:
        entries = storable(audit)
        async with self._lock:
            self._wallets[_wallet_key(wallet)] = wallet
            self._audit.extend(entries)

    # trades
    async def add_trade(self, trade: Trade, *, audit: AuditEntries = ()) -> None:
        entries = storable(audit)
        async with self._lock:
            self._trades[trade.trade_id] = trade
            self._audit.extend(entries)

    async def get_trade(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        trade = self._trades.get(trade_id)
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
            for t in self._trades.values()
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
        entries = storable(audit)
        async with self._lock:
            stored = self._trades.get(trade.trade_id)
            if stored is None or stored.status is not expected:
                return False
            self._trades[trade.trade_id] = trade
            self._audit.extend(entries)
            return True

    async def expire_lapsed(
        self, client_id: str, user_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> int:
        if audit is not None:
            storable((audit,))
        async with self._lock:
            count = 0
            for trade_id, t in list(self._trades.items()):
                if t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now):
                    self._trades[trade_id] = t.expire(now)
                    if audit is not None:
                        self._audit.append(dataclasses.replace(audit, target=trade_id))
                    count += 1
            return count

    # sends
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
        entries = storable(audit)
        async with self._lock:
            stored = self._sends.get((client_id, request_id))
            if stored is None:
                record = SendRecord.start(client_id, request_id, fingerprint, now, lease)
            else:
                record = stored.claim(fingerprint, now, lease)
            if record is not stored:
                self._sends[(client_id, request_id)] = record
                self._audit.extend(entries)
            return record

    async def advance_send(
        self, current: SendRecord, new: SendRecord, *, audit: AuditEntries = ()
    ) -> bool:
        current.require_successor(new)
        entries = storable(audit)
        async with self._lock:
            stored = self._sends.get((current.client_id, current.request_id))
            if stored is None or (stored.state, stored.attempt) != (current.state, current.attempt):
                return False
            self._sends[(current.client_id, current.request_id)] = new
            self._audit.extend(entries)
            return True

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None:
        return self._sends.get((client_id, request_id))

    # audit
    async def append_audit(self, entry: AuditEntry) -> None:
        (checked,) = storable((entry,))
        async with self._lock:
            self._audit.append(checked)

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        return list(reversed(self._audit[-limit:]))

    # nonces: one process holds everything here, so an in-process lock per address is enough
    def nonce_leases(self) -> NonceLeases:
        return self._nonce_leases


def _wallet_key(wallet: WalletRecord) -> WalletKey:
    return (wallet.client_id, wallet.owner, wallet.user_id)


def build(**_: Any) -> InMemoryRepo:
    """Entry point `walletcore.repos: memory`."""
    return InMemoryRepo()


__all__ = ["InMemoryRepo", "build"]
