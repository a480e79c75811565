"""Kill -9 between a buy's fill and its delivery: the coins are delivered exactly once, on
PostgreSQL (docs/settlement.md, "Exactly once").

A child process (crash_worker.py, mode `deliver`) approves a buy on the sandbox chains and
stops at a chosen point after the venue filled it: the trade `completed` with its
settlement still `reserved`; the delivery `queued` with nothing signed; the delivery
signed and stored, not broadcast; the delivery accepted by the network, the settlement not
yet `sent`. It is SIGKILLed there. A restarted service (a container
of its own on the same database, minutes later) runs the `settle_coins` and `follow_sends`
jobs: the settlement ends `settled`, with one send record under the delivery's first key,
one transaction from the desk on the chain, and the user holds exactly the bought amount.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from crash_support import Store

from walletcore.clock import ManualClock, SystemClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.domain.sends import SendState
from walletcore.domain.settlement import SettlementStatus
from walletcore.domain.trade import TradeStatus
from walletcore.services.context import Caller
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_sandbox.ledger import DATA_FILE as LEDGER_FILE
from walletcore_sandbox.ledger import SandboxLedger
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url

pytestmark = [pytest.mark.trades, pytest.mark.postgres]
WORKER = Path(__file__).with_name("crash_worker.py")
PASSWORD = "correct horse battery"
ETH = CONTRACT_CATALOG.asset_by_id(2)
BOUGHT = 2 * 10**17  # 0.2 ETH
#: where the worker stops, and what the settlement reads after the kill
STOPS = {
    "completed": (SettlementStatus.RESERVED, 0),
    "queued": (SettlementStatus.QUEUED, 0),
    "signed": (SettlementStatus.QUEUED, 1),
    "broadcast": (SettlementStatus.QUEUED, 1),
}


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A PostgreSQL schema of its own, dropped after (the kill -9 tests of the sends and
    trades run on SQLite too)."""
    url = pg_test_url()
    schema = await create_schema_async(url)
    try:
        yield Store("postgres", url, schema)
    finally:
        await drop_schema_async(url, schema)


def _container(home: Path, master_key: bytes, storage: Any, clock: Any) -> Container:
    keystore = SealedKeyStore(
        master_key, kdf=KdfParams(opslimit=1, memlimit=64 * 1024), allow_weak_kdf=True
    )
    return create_container(Settings(home=home), clock=clock, keystore=keystore, storage=storage)


async def _kill_at(config: dict[str, Any], path: Path) -> None:
    """Run the worker until it says STOPPED, then SIGKILL it."""
    path.write_text(json.dumps(config))
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")},
    )
    assert child.stdout is not None
    lines = []
    try:
        while (line := await asyncio.wait_for(child.stdout.readline(), timeout=60)) != b"":
            lines.append(line.strip())
            if line.strip() == b"STOPPED":
                break
    finally:
        child.send_signal(signal.SIGKILL)
        _, err = await child.communicate()
    assert lines[-1:] == [b"STOPPED"], (lines, err)
    assert child.returncode == -signal.SIGKILL


async def _sent_from(home: Path, address: str) -> list[Any]:
    ledger = SandboxLedger(
        home / LEDGER_FILE, SystemClock(), lambda *_: False, catalog=CONTRACT_CATALOG
    )
    try:
        return [tx for tx in await ledger.transactions() if tx.sender == address]
    finally:
        await ledger.aclose()


@pytest.mark.parametrize("stop_at", list(STOPS))
async def test_a_buy_killed_between_its_fill_and_its_delivery_is_delivered_once(
    store: Store, tmp_path: Path, stop_at: str
) -> None:
    home, master_key = tmp_path / "home", secrets.token_bytes(32)
    setup = store.storage(migrate=True)
    service = _container(home, master_key, setup, SystemClock())
    try:
        issued = await service.auth().create_client("crash")
        client = issued.client
        created = await service.wallets().create(Caller(client, "create"), password=PASSWORD)
        user = created.addresses[Chain.ETHEREUM]
        desk = (await service.wallets().provision_platform(client.client_id))[Chain.ETHEREUM]
        await service.gateways()[Chain.ETHEREUM].fund(desk, ETH, 10**18)  # type: ignore[attr-defined]
        quote = await service.trading().order(
            Caller(client, "quote"), user_id=created.user_id, asset_id=ETH.id, crypto_amount="0.2"
        )
        config = {
            "mode": "deliver",
            "kind": store.kind,
            "url": store.url,
            "schema": store.schema,
            "client_id": client.client_id,
            "user_id": created.user_id,
            "trade_id": quote.trade_id,
            "home": str(home),
            "master_key": master_key.hex(),
            "stop_at": stop_at,
            "seed": 0,
        }
        await _kill_at(config, tmp_path / "deliver.json")
    finally:
        await setup.aclose()

    storage = store.storage()
    # the restarted service, minutes later: the killed process's send lease has lapsed
    clock = ManualClock(SystemClock().now() + timedelta(minutes=5))
    restarted = _container(home, master_key, storage, clock)
    try:
        reads = autocommit(storage)
        trade = await reads.trades.get(client.client_id, created.user_id, quote.trade_id)
        assert trade is not None and trade.status is TradeStatus.COMPLETED
        settlement = await reads.settlements.get(client.client_id, quote.trade_id)
        assert settlement is not None
        assert (settlement.status, settlement.attempt) == STOPS[stop_at], settlement
        first = f"walletcore:delivery:{quote.trade_id}:1"
        signed = await reads.sends.get(client.client_id, first)
        if stop_at == "broadcast":  # on the chain once already
            assert signed is not None and signed.tx_hash is not None, signed
            assert [tx.tx_hash for tx in await _sent_from(home, desk)] == [signed.tx_hash]
        else:
            assert await _sent_from(home, desk) == []  # nothing on the chain yet
        if stop_at == "signed":  # stored before its broadcast: resumed with the same bytes
            assert signed is not None and signed.state is SendState.SIGNED, signed
        elif stop_at != "broadcast":
            assert signed is None

        jobs = restarted.jobs()
        for _ in range(4):
            await jobs.settle_coins()
            await jobs.follow_sends()
            clock.advance(61)
        settlement = await reads.settlements.get(client.client_id, quote.trade_id)
        assert settlement is not None and settlement.status is SettlementStatus.SETTLED, settlement
        assert settlement.attempt == 1
        assert await reads.sends.get(client.client_id, first) is not None
        second = f"walletcore:delivery:{quote.trade_id}:2"
        assert await reads.sends.get(client.client_id, second) is None
        on_chain = await _sent_from(home, desk)
        assert len(on_chain) == 1, on_chain  # one transaction: delivered once
        assert (on_chain[0].recipient, on_chain[0].amount_units) == (user, BOUGHT)
        assert on_chain[0].tx_hash == settlement.tx_hash
        if signed is not None:
            assert on_chain[0].tx_hash == signed.tx_hash
        assert await restarted.gateways()[Chain.ETHEREUM].balance(user, ETH) == BOUGHT
    finally:
        await storage.aclose()
