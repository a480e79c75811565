"""Run by test_sql_crash_recovery in a subprocess: approve a trade at a venue that never
answers, and say so on stdout, so the test can kill this process mid-approval.

    python crash_child.py URL SCHEMA|- CLIENT_ID USER_ID TRADE_ID HOME
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from walletcore.clock import SystemClock
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, Unknown
from walletcore.ports import TradeVenue
from walletcore.services.context import Caller
from walletcore.settings import Settings
from walletcore.testing import autocommit
from walletcore_sql.storage import SqlStorage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_helpers import trading_service


class HangingVenue(TradeVenue):
    async def execute(self, order: Order) -> Fill | Accepted:
        print("EXECUTING", order.trade_id, flush=True)
        await asyncio.Event().wait()  # never answers: the order is "at the venue"
        raise AssertionError("unreachable")

    async def status(self, order: Order) -> OrderOutcome:
        return Unknown()


async def main(
    url: str, schema: str, client_id: str, user_id: str, trade_id: str, home: str
) -> None:
    storage = SqlStorage(url, migrate=False, schema=None if schema == "-" else schema)
    client = await autocommit(storage).clients.get(
        client_id
    )  # no start(): first use must be lazy-safe
    assert client is not None
    service = trading_service(storage, SystemClock(), HangingVenue(), Settings(home=Path(home)))
    await service.approve(Caller(client, "crash-req"), user_id=user_id, trade_id=trade_id)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
