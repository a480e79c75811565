"""Helpers of the HTTP tests of trades that move coins on a chain's engine
(docs/settlement.md): a trade quoted and approved, its settlement carried on by the jobs as
a worker runs them (`follow_sends`, then `settle_coins`), balances read over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

from http_support import Api, assert_ok

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.ports import Lifecycle
from walletcore.services.settlements import SettlementSettings
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore


async def traded(api: Api, path: str, user_id: str, asset_id: int, amount: str) -> dict[str, Any]:
    """A quote of `amount` (`/order`: a buy, `/sell`: a sell), still open."""
    body = {"userId": user_id, "assetId": asset_id, "cryptoAmount": amount}
    quote: dict[str, Any] = assert_ok(await api.post(path, body))
    assert quote["status"] == "open" and "settlement" not in quote
    return quote


async def approved(api: Api, user_id: str, trade_id: str, **extra: Any) -> dict[str, Any]:
    trade: dict[str, Any] = assert_ok(
        await api.post("/trade/approve", {"userId": user_id, "tradeId": trade_id, **extra})
    )
    assert trade["status"] == "completed"
    return trade


async def trade_of(api: Api, user_id: str, trade_id: str) -> dict[str, Any]:
    found: dict[str, Any] = assert_ok(
        await api.post("/trade", {"userId": user_id, "tradeId": trade_id})
    )
    return found


@asynccontextmanager
async def worker_of(
    settings: Settings, clock: ManualClock, keystore: SealedKeyStore
) -> AsyncIterator[Container]:
    """A worker: a container of its own on the same database and key store, as
    `walletcore worker` (the app's clients live on the test client's event loop)."""
    built = create_container(settings, clock=clock, keystore=keystore)
    try:
        yield built
    finally:
        for gateway in built.gateways().values():
            if isinstance(gateway, Lifecycle):
                await gateway.aclose()
        storage = built.storage()
        if isinstance(storage, Lifecycle):
            await storage.aclose()


async def run_jobs(worker: Container, clock: ManualClock) -> None:
    """One run of each job a worker runs for settlements, once the sent ones are due."""
    clock.advance(SettlementSettings().follow_seconds + 1)
    jobs = worker.jobs()
    await jobs.follow_sends()
    await jobs.settle_coins()


async def balance(api: Api, asset_id: int, user_id: str | None = None) -> Decimal:
    """A user's balance on chain, or the desk's (`user_id` None)."""
    if user_id is None:
        return Decimal(assert_ok(await api.post("/platform/balance", {"assetId": asset_id})))
    body = {"userId": user_id, "assetId": asset_id}
    return Decimal(assert_ok(await api.post("/balance", body)))


async def send_fee(api: Api, asset_id: int, tx_hash: str, user_id: str | None = None) -> Decimal:
    """The fee the chain charged for the transfer `tx_hash` (`/txid` of its sender)."""
    body = {"assetId": asset_id, "txHash": tx_hash}
    if user_id is None:
        row = assert_ok(await api.post("/platform/txid", body))
    else:
        row = assert_ok(await api.post("/txid", {**body, "userId": user_id}))
    assert row["type"] == "send" and row["status"] == "success", row
    return Decimal(row["fee"])
