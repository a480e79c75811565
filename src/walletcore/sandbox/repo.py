"""An in-memory Repo: the reference implementation of the Repo contract."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import NonceLeases, Repo
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
        self._nonce_leases = LocalNonceLeases()

    # api clients
    async def add_client(self, client: ApiClient) -> None:
        async with self._lock:
            if client.client_id in self._clients:
                raise InvalidRequest("api client exists already")
            self._clients[client.client_id] = client

    async def get_client(self, client_id: str) -> ApiClient | None:
        return self._clients.get(client_id)

    async def list_clients(self) -> list[ApiClient]:
        return list(self._clients.values())

    async def update_client(self, client: ApiClient) -> None:
        async with self._lock:
            self._clients[client.client_id] = client

    # users and wallets
    async def add_user_wallet(self, user: User, wallet: WalletRecord) -> None:
        async with self._lock:
            self._users[(user.client_id, user.user_id)] = user
            self._wallets[_wallet_key(wallet)] = wallet

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        return self._users.get((client_id, user_id))

    async def add_wallet(self, wallet: WalletRecord) -> bool:
        async with self._lock:
            key = _wallet_key(wallet)
            if key in self._wallets:
                return False
            self._wallets[key] = wallet
            return True

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        return self._wallets.get((client_id, owner, user_id))

    async def update_wallet(self, wallet: WalletRecord) -> None:
        async with self._lock:
            self._wallets[_wallet_key(wallet)] = wallet

    # trades
    async def add_trade(self, trade: Trade) -> None:
        async with self._lock:
            self._trades[trade.trade_id] = trade

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

    async def swap_trade(self, expected: TradeStatus, trade: Trade) -> bool:
        async with self._lock:
            stored = self._trades.get(trade.trade_id)
            if stored is None or stored.status is not expected:
                return False
            self._trades[trade.trade_id] = trade
            return True

    async def expire_lapsed(self, client_id: str, user_id: str, now: datetime) -> int:
        async with self._lock:
            count = 0
            for trade_id, t in list(self._trades.items()):
                if t.client_id == client_id and t.user_id == user_id and t.lapses_unapproved(now):
                    self._trades[trade_id] = t.expire(now)
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
    ) -> SendRecord:
        async with self._lock:
            stored = self._sends.get((client_id, request_id))
            if stored is None:
                record = SendRecord.start(client_id, request_id, fingerprint, now, lease)
            else:
                record = stored.claim(fingerprint, now, lease)
            self._sends[(client_id, request_id)] = record
            return record

    async def advance_send(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        async with self._lock:
            stored = self._sends.get((current.client_id, current.request_id))
            if stored is None or (stored.state, stored.attempt) != (current.state, current.attempt):
                return False
            self._sends[(current.client_id, current.request_id)] = new
            return True

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None:
        return self._sends.get((client_id, request_id))

    # audit
    async def append_audit(self, entry: AuditEntry) -> None:
        async with self._lock:
            self._audit.append(entry)

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
