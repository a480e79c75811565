"""Kill -9 at random points: the audit log is written with the changes it records, on
SQLite and PostgreSQL.

A child process (crash_worker.py) approves trades, or makes sends on the sandbox chain,
one after the other; it is SIGKILLed a few times at random moments, restarted, and finally
let run to the end. After every kill, and at the end:

- trades: every trade that was approved (executing, completed, failed: `approvedAt` set)
  has exactly one `trade.approve` `ok` entry, and no other trade has one; the venue was
  asked to execute each trade at most once, and only trades with that entry; at the end
  every trade is completed with exactly one `trade.settle` entry;
- sends: every send record that reached `signed` (or later) has exactly one `wallet.send`
  `ok` entry of its signing, naming its tx hash, and no other tx hash has one; every
  transaction on the chain is one of those (nothing signed twice, nothing sent twice); at
  the end every send is finished and on the chain once.

The seed of a run is in the failure message, to replay it with WALLETCORE_CRASH_SEED.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from crash_support import Store

from walletcore.clock import SystemClock
from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.domain.sends import SendState
from walletcore.domain.trade import TradeStatus
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller
from walletcore.services.trading import TradingService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, FixedHoldings, autocommit
from walletcore_sandbox.chain import SandboxGateway
from walletcore_sandbox.ledger import DATA_FILE as LEDGER_FILE
from walletcore_sandbox.ledger import SandboxLedger
from walletcore_sandbox.prices import SandboxPriceSource
from walletcore_sandbox.venue import SandboxVenue

WORKER = Path(__file__).with_name("crash_worker.py")
KILLS = 4
TRADES = 30
SENDS = 24
PASSWORD = "correct horse battery"
RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
#: How long a run lives before it is killed, in seconds after it said READY.
KILL_AFTER = (0.02, 0.35)


@pytest.fixture
def seed() -> int:
    return int(os.environ.get("WALLETCORE_CRASH_SEED") or secrets.randbits(32))


@dataclass
class Runs:
    """Starts the worker with one config, kills it, runs it to the end."""

    config: dict[str, Any]
    folder: Path
    rng: random.Random
    outputs: list[bytes] = field(default_factory=list)

    async def _start(self, run: int) -> asyncio.subprocess.Process:
        path = self.folder / f"run-{run}.json"
        path.write_text(json.dumps({**self.config, "run": run, "seed": self.rng.randrange(2**32)}))
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            str(path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")},
        )
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
        if line.strip() != b"READY":
            child.kill()
            _, err = await child.communicate()
            raise AssertionError(line + err)
        return child

    async def kill_midway(self, run: int) -> None:
        child = await self._start(run)
        await asyncio.sleep(self.rng.uniform(*KILL_AFTER))
        with contextlib.suppress(ProcessLookupError):  # it may have finished and been reaped
            child.send_signal(signal.SIGKILL)
        out, err = await child.communicate()
        self.outputs.append(out)
        if child.returncode != -signal.SIGKILL:  # it finished first: fine, if cleanly
            assert child.returncode == 0 and out.rstrip().endswith(b"DONE"), err

    async def to_the_end(self, run: int) -> bytes:
        child = await self._start(run)
        out, err = await asyncio.wait_for(child.communicate(), timeout=60)
        assert child.returncode == 0, err
        assert out.rstrip().endswith(b"DONE"), out + err
        return out


# -- trades ------------------------------------------------------------------------------------
async def test_killed_approvals_leave_one_approve_entry_per_execution(
    store: Store,
    tmp_path: Path,
    seed: int,
    make_user: Callable[..., Any],
) -> None:
    clock = SystemClock()
    setup = store.storage(migrate=True)
    client = ApiClient(new_id(), "crash", "00" * 32, created_at=clock.now())
    await autocommit(setup).clients.add(client)
    user_id: str = await make_user(setup, clock, client.client_id)
    trading = TradingService(
        setup,
        clock,
        SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols),
        SandboxVenue(SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols)),
        AssetPolicy(CONTRACT_CATALOG),
        Auditor(setup, clock),
        quote_ttl_seconds=3600,
        holdings=FixedHoldings(storage=setup),
    )
    caller = Caller(client, "setup")
    trade_ids = [
        (await trading.sell(caller, user_id=user_id, asset_id=2, crypto_amount="0.01")).trade_id
        for _ in range(TRADES)
    ]
    venue_log = tmp_path / "venue.log"
    runs = Runs(
        {
            "mode": "trades",
            "kind": store.kind,
            "url": store.url,
            "schema": store.schema,
            "client_id": client.client_id,
            "user_id": user_id,
            "trade_ids": trade_ids,
            "venue_log": str(venue_log),
        },
        tmp_path,
        random.Random(seed),
    )
    try:
        for run in range(KILLS):
            await runs.kill_midway(run)
            await _check_trades(setup, client, user_id, trade_ids, venue_log, seed, final=False)
        await runs.to_the_end(KILLS)
        await _check_trades(setup, client, user_id, trade_ids, venue_log, seed, final=True)
    finally:
        await setup.aclose()


async def _check_trades(
    storage: Any,
    client: ApiClient,
    user_id: str,
    trade_ids: list[str],
    venue_log: Path,
    seed: int,
    *,
    final: bool,
) -> None:
    why = f"seed {seed}"
    entries = await autocommit(storage).audit.newest(limit=100_000)
    approved = Counter(
        e.target for e in entries if (e.action, e.outcome) == ("trade.approve", "ok")
    )
    settled = Counter(e.target for e in entries if e.action == "trade.settle")
    executed = Counter(venue_log.read_text().split()) if venue_log.exists() else Counter()
    assert all(n == 1 for n in executed.values()), (why, executed)  # never executed twice
    for trade_id in trade_ids:
        trade = await autocommit(storage).trades.get(client.client_id, user_id, trade_id)
        assert trade is not None
        if trade.approved_at is not None:
            assert trade.status in (
                TradeStatus.EXECUTING,
                TradeStatus.APPROVED,
                TradeStatus.COMPLETED,
                TradeStatus.FAILED,
            ), (why, trade)
            assert approved[trade_id] == 1, (why, trade, approved[trade_id])
        else:
            assert trade.status is TradeStatus.OPEN, (why, trade)
            assert approved[trade_id] == 0, (why, trade)
            assert executed[trade_id] == 0, (why, trade)  # the venue only after the commit
        assert settled[trade_id] == (1 if trade.status is TradeStatus.COMPLETED else 0), (
            why,
            trade,
        )
        if final:
            assert trade.status is TradeStatus.COMPLETED, (why, trade)
    assert set(approved) <= set(trade_ids), why
    if final:
        assert sum(approved.values()) == len(trade_ids), why


# -- sends -------------------------------------------------------------------------------------
async def test_killed_sends_leave_their_entry_for_every_signed_transaction(
    store: Store,
    tmp_path: Path,
    seed: int,
) -> None:
    from walletcore.container import create_container
    from walletcore_chains.keystore import SealedKeyStore
    from walletcore_chains.sealing import KdfParams

    home = tmp_path / "home"
    master_key = secrets.token_bytes(32)
    keystore = SealedKeyStore(
        master_key, kdf=KdfParams(opslimit=1, memlimit=64 * 1024), allow_weak_kdf=True
    )
    clock = SystemClock()
    setup = store.storage(migrate=True)
    container = create_container(Settings(home=home), clock=clock, keystore=keystore, storage=setup)
    issued = await container.auth().create_client("crash")
    created = await container.wallets().create(Caller(issued.client, "create"), password=PASSWORD)
    sender = created.addresses[Chain.ETHEREUM]
    gateway = container.gateways()[Chain.ETHEREUM]
    assert isinstance(gateway, SandboxGateway)
    await gateway.fund(sender, CONTRACT_CATALOG.asset_by_id(2), 10**19)  # 10 ETH
    request_ids = [f"send-{n:02d}" for n in range(SENDS)]
    runs = Runs(
        {
            "mode": "sends",
            "kind": store.kind,
            "url": store.url,
            "schema": store.schema,
            "client_id": issued.client.client_id,
            "user_id": created.user_id,
            "request_ids": request_ids,
            "home": str(home),
            "master_key": master_key.hex(),
            "password": PASSWORD,
            "recipient": RECIPIENT,
        },
        tmp_path,
        random.Random(seed),
    )
    client_id = issued.client.client_id
    try:
        for run in range(KILLS):
            await runs.kill_midway(run)
            await _check_sends(setup, client_id, request_ids, home, sender, seed, final=False)
        out = await runs.to_the_end(KILLS)
        assert b"REFUSED" not in out, out
        await _check_sends(setup, client_id, request_ids, home, sender, seed, final=True)
    finally:
        await setup.aclose()


async def _check_sends(
    storage: Any,
    client_id: str,
    request_ids: list[str],
    home: Path,
    sender: str,
    seed: int,
    *,
    final: bool,
) -> None:
    why = f"seed {seed}"
    entries: list[AuditEntry] = await autocommit(storage).audit.newest(limit=100_000)
    signed_entries = Counter(
        e.target
        for e in entries
        if (e.action, e.outcome, e.detail) == ("wallet.send", "ok", "signed")
    )
    hashes: dict[str, str] = {}
    for request_id in request_ids:
        record = await autocommit(storage).sends.get(client_id, request_id)
        if record is None:
            assert not final, why
            continue
        if record.state is SendState.STARTED:
            assert record.tx_hash is None and not final, (why, record)
            continue
        assert record.tx_hash is not None, (why, record)
        hashes[record.tx_hash] = request_id
        # Written before the broadcast, with the signed record: exactly one, whatever died.
        assert signed_entries[record.tx_hash] == 1, (why, record, signed_entries)
        for entry in entries:
            if entry.target == record.tx_hash:
                assert entry.request_id == request_id and entry.client_id == client_id, entry
        if final:
            assert record.is_finished and record.result is not None, (why, record)
            assert record.result.get("txHash") == record.tx_hash, (why, record)
    assert set(signed_entries) == set(hashes), why  # no entry for a transaction never kept
    reader = SandboxLedger(
        home / LEDGER_FILE, SystemClock(), lambda *_: False, catalog=CONTRACT_CATALOG
    )
    try:
        on_chain = [tx.tx_hash for tx in await reader.transactions() if tx.sender == sender]
    finally:
        await reader.aclose()
    assert len(on_chain) == len(set(on_chain)), why
    # Everything on the chain is a kept, audited signing: one transaction per request.
    assert set(on_chain) <= set(hashes), (why, on_chain, hashes)
    if final:
        assert sorted(on_chain) == sorted(hashes) and len(on_chain) == len(request_ids), why
