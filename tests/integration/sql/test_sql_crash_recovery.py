"""Kill -9 mid-approval: the trade is left `executing` in the store, and a new process's
`/trade` poll (sandbox venue) resolves it to `completed`."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from sql_helpers import ClockPrices, Db, trading_service

from walletcore.clock import SystemClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.domain.trade import TradeStatus
from walletcore.services.context import Caller
from walletcore.settings import Settings
from walletcore.testing import autocommit
from walletcore_sandbox.venue import SandboxVenue

CHILD = Path(__file__).with_name("crash_child.py")


async def test_a_killed_approval_stays_executing_and_a_poll_completes_it(
    database: Db, settings: Settings, make_user: Callable[..., object]
) -> None:
    clock = SystemClock()
    setup = database.storage(migrate=True)
    client = ApiClient(client_id=new_id(), name="crash", key_hash="00" * 32)
    await autocommit(setup).clients.add(client)
    user_id: str = await make_user(setup, clock, client.client_id)  # type: ignore[misc]
    caller = Caller(client, new_id())
    quoted = await trading_service(setup, clock, SandboxVenue(ClockPrices(clock)), settings).sell(
        caller, user_id=user_id, asset_id=2, crypto_amount="0.25"
    )
    await setup.aclose()

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        database.url,
        database.schema or "-",
        client.client_id,
        user_id,
        quoted.trade_id,
        str(settings.home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")},
    )
    try:
        line = await asyncio.wait_for(child.stdout.readline(), timeout=60)  # type: ignore[union-attr]
        assert line.split() == [b"EXECUTING", quoted.trade_id.encode()], (
            line + await child.stderr.read()  # type: ignore[union-attr]
        )
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL

    restarted = database.storage()  # a new process: schema checked, not migrated
    try:
        stuck = await autocommit(restarted).trades.get(client.client_id, user_id, quoted.trade_id)
        assert stuck is not None and stuck.status is TradeStatus.EXECUTING
        assert stuck.approved_at is not None and stuck.completed_at is None

        polled = await trading_service(
            restarted, clock, SandboxVenue(ClockPrices(clock)), settings
        ).get(caller, user_id=user_id, trade_id=quoted.trade_id)
        assert polled.status is TradeStatus.COMPLETED
        assert (
            polled.executed is not None
            and polled.executed.crypto_amount == stuck.quote.crypto_amount
        )
        assert polled.reference == f"SBX-{quoted.trade_id[:12].upper()}"
        assert (
            await autocommit(restarted).trades.get(client.client_id, user_id, quoted.trade_id)
            == polled
        )
    finally:
        await restarted.aclose()
