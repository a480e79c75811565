"""Run by the kill -9 tests in a subprocess: approve trades, or make sends, one after the
other until done, so the test can SIGKILL it anywhere in between.

    python crash_worker.py CONFIG.json

CONFIG (JSON): `mode` (`trades` | `sends` | `deliver`), `kind` (`sqlite`, `postgres`), `url` (the
database's), `schema` (or null), `client_id`,
`user_id`, `run` (this run's number), `seed`; trades: `trade_ids`, `venue_log`; sends:
`request_ids`, `home`, `master_key` (hex), `password`, `recipient`; deliver: `trade_id`,
`home`, `master_key`, `stop_at`.

It prints `READY` once set up, one line per finished step, and `DONE` at the end. In
`deliver` it approves one buy and stops at `stop_at`, printing `STOPPED` and waiting there
for the kill: `completed` (the trade completed, its settlement not yet carried on),
`queued` (the delivery queued, nothing signed), `signed` (the delivery signed and
stored, not broadcast) or `broadcast` (accepted by the network, the settlement not yet
`sent`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from walletcore.clock import SystemClock
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import DomainError
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, TradeStatus
from walletcore.ports import PriceMap, PriceSource, TradeVenue
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller
from walletcore.services.trading import TradingService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, FixedHoldings, autocommit
from walletcore_sandbox.prices import sandbox_unit_price
from walletcore_sandbox.venue import SandboxVenue
from walletcore_sql.storage import SqlStorage

#: Each run's clock is this much later than the one before: a killed run's send leases
#: (60 s) have lapsed for the next, which resumes them at once instead of answering 409.
RUN_OFFSET = timedelta(minutes=5)


class RecordingVenue(TradeVenue):
    """The sandbox venue, writing one durable line per order it is asked to execute before
    it answers (what a real venue would have seen), and taking a moment to answer."""

    def __init__(self, log_path: Path, rng: random.Random) -> None:
        self._log = log_path
        self._rng = rng
        self._inner = SandboxVenue(Prices(SystemClock()))

    async def execute(self, order: Order) -> Fill | Accepted:
        fd = os.open(self._log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{order.trade_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        await asyncio.sleep(self._rng.uniform(0, 0.01))
        return await self._inner.execute(order)

    async def status(self, order: Order) -> OrderOutcome:
        return await self._inner.status(order)

    async def cancel(self, order: Order) -> OrderOutcome:
        return await self._inner.cancel(order)


class Prices(PriceSource):
    def __init__(self, clock: SystemClock) -> None:
        self._clock = clock

    async def price_map(self) -> PriceMap:
        return {}

    async def unit_price(self, symbol: str, fiat: Fiat) -> Any:
        return sandbox_unit_price(symbol, fiat, self._clock.now())


class OffsetClock:
    def __init__(self, offset: timedelta) -> None:
        self._offset = offset

    def now(self) -> datetime:
        return SystemClock().now() + self._offset


async def approve_trades(config: dict[str, Any], storage: Any, rng: random.Random) -> None:
    client = await autocommit(storage).clients.get(config["client_id"])
    assert client is not None
    clock = SystemClock()
    settings = Settings(home=Path(config["venue_log"]).parent)
    trading = TradingService(
        storage,
        clock,
        Prices(clock),
        RecordingVenue(Path(config["venue_log"]), rng),
        AssetPolicy(CONTRACT_CATALOG, settings.limited_assets, settings.unavailable_assets),
        Auditor(storage, clock),
        quote_ttl_seconds=3600,
        holdings=FixedHoldings(storage=storage),
    )
    user_id, run = config["user_id"], config["run"]
    print("READY", flush=True)
    for n, trade_id in enumerate(config["trade_ids"]):
        trade = await autocommit(storage).trades.get(client.client_id, user_id, trade_id)
        assert trade is not None
        if trade.status is TradeStatus.OPEN:
            # Two approvals at once, as a client retrying would send: one executes.
            calls = [
                trading.approve(
                    Caller(client, f"approve-{run}-{n}-{i}"), user_id=user_id, trade_id=trade_id
                )
                for i in range(2)
            ]
            results = await asyncio.gather(*calls, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, DomainError):
                    raise result
        elif trade.status in (TradeStatus.EXECUTING, TradeStatus.APPROVED):
            await trading.get(Caller(client, f"poll-{run}-{n}"), user_id=user_id, trade_id=trade_id)
        print("TRADE", trade_id, flush=True)
    print("DONE", flush=True)


async def make_sends(config: dict[str, Any], storage: Any) -> None:
    from walletcore.container import create_container
    from walletcore_chains.keystore import SealedKeyStore
    from walletcore_chains.sealing import KdfParams

    keystore = SealedKeyStore(
        bytes.fromhex(config["master_key"]),
        kdf=KdfParams(opslimit=1, memlimit=64 * 1024),
        allow_weak_kdf=True,
    )
    clock = OffsetClock(RUN_OFFSET * config["run"])
    settings = Settings(home=Path(config["home"]))
    container = create_container(settings, clock=clock, keystore=keystore, storage=storage)
    sends = container.sends()
    client = await autocommit(storage).clients.get(config["client_id"])
    assert client is not None
    await _warm_up(container, storage, config)  # so the kills land in the sends themselves
    print("READY", flush=True)
    for request_id in config["request_ids"]:
        try:
            receipt = await sends.send(
                Caller(client, request_id, request_id_given=True),
                request_id=request_id,
                user_id=config["user_id"],
                asset_id=2,
                recipient=config["recipient"],
                amount="0.001",
                password=config["password"],
            )
        except DomainError as exc:
            print("REFUSED", request_id, exc.status, exc.message, flush=True)
            continue
        print("SENT", request_id, receipt.tx_hash, flush=True)
    print("DONE", flush=True)


async def _warm_up(container: Any, storage: Any, config: dict[str, Any]) -> None:
    """Load what the first send would load lazily (chain libraries, signing code): it
    takes most of a second, the sends themselves milliseconds. Nothing is stored."""
    from walletcore.domain.assets import Chain
    from walletcore.domain.wallet import WalletOwner

    gateway = container.gateways()[Chain.ETHEREUM]
    gateway.validate_address(config["recipient"])
    wallet = await autocommit(storage).wallets.get(
        config["client_id"], WalletOwner.USER, config["user_id"]
    )
    assert wallet is not None
    keystore = container.keystore()
    async with keystore.unseal(wallet.sealed, config["password"], Chain.ETHEREUM) as key:
        signature = key.sign(bytes(32))
        verify = container.signature_verifier()
        verify(Chain.ETHEREUM, key.address, bytes(32), signature)


async def approve_buy(config: dict[str, Any], storage: Any) -> None:
    """Approve one buy and stop at `stop_at`, between the fill and the delivery."""
    from walletcore.container import create_container
    from walletcore_chains.keystore import SealedKeyStore
    from walletcore_chains.sealing import KdfParams

    keystore = SealedKeyStore(
        bytes.fromhex(config["master_key"]),
        kdf=KdfParams(opslimit=1, memlimit=64 * 1024),
        allow_weak_kdf=True,
    )
    settings = Settings(home=Path(config["home"]))
    container = create_container(settings, keystore=keystore, storage=storage)
    client = await autocommit(storage).clients.get(config["client_id"])
    assert client is not None

    async def stop(*_: Any, **__: Any) -> Any:
        print("STOPPED", flush=True)
        await asyncio.Event().wait()  # until killed

    stop_at = config["stop_at"]
    if stop_at == "completed":
        container.settlements().follow = stop
    elif stop_at == "queued":
        container.settlements()._deliver = stop
    elif stop_at == "signed":
        container.sends()._broadcast = stop
    else:
        settlements = container.settlements()
        move = settlements._move

        async def move_unless_sent(caller: Any, current: Any, new: Any) -> Any:
            if new.status.value == "sent":
                return await stop()
            return await move(caller, current, new)

        settlements._move = move_unless_sent
    print("READY", flush=True)
    await container.trading().approve(
        Caller(client, "approve-buy"), user_id=config["user_id"], trade_id=config["trade_id"]
    )
    print("DONE", flush=True)


def _storage(config: dict[str, Any]) -> SqlStorage:
    return SqlStorage(config["url"], migrate=False, schema=config["schema"])


async def main(path: str) -> None:
    config = json.loads(Path(path).read_text())
    rng = random.Random(config["seed"])
    storage = _storage(config)
    try:
        if config["mode"] == "trades":
            await approve_trades(config, storage, rng)
        elif config["mode"] == "deliver":
            await approve_buy(config, storage)
        else:
            await make_sends(config, storage)
    finally:
        await storage.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
