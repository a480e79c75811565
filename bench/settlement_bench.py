#!/usr/bin/env python3
"""What moving the coins of trades costs a trade: sell + approve and buy + approve through
the services, with settlement on against the same work with it off, in one run.

    .venv/bin/python bench/settlement_bench.py [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--sqlite] [--pairs 200] [--rounds 3]

On a throwaway PostgreSQL database (migrated, dropped at the end), or a fresh SQLite file
with `--sqlite`: two containers as `walletcore serve` builds them (repo `sql`, sandbox
prices, venue and chains), one with `WALLETCORE_SETTLEMENT_ENABLED` true, one false, each
with its own api client and users funded on the sandbox chain. The desk (platform wallet)
of the settling client is provisioned and funded, so a buy is delivered in the request
that approves it.

Workloads, one call at a time (latency, not throughput):
- `sell`: `/sell` 0.01 BTC then `/trade/approve` without a password: the hold, the
  approval, the fill, the settlement `awaiting_password` (off: the quote, approval, fill);
- `buy`: `/order` 0.01 BTC then `/trade/approve`: with settlement, the desk's delivery is
  signed and broadcast on the sandbox chain before the answer (off: no transfer);
- `buy+send` (settlement off): the same, then `/platform/send` of the amount to the user:
  the delivery's work done by hand, the baseline a delivery is measured against.
The two containers take turns for `--rounds` rounds of `--pairs` pairs each; p50 and p90
per workload and the on/off ratio of the medians are printed. A program printing figures,
not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_bench import DEFAULT_PG_URL, pg_create_database, pg_drop_database, pg_urls

PASSWORD = "bench password 1"
#: api client id -> user id -> the user's BITCOIN address
addresses: dict[str, dict[str, str]] = {}


def say(text: str) -> None:
    print(text, flush=True)


async def build(url: str, home: Path, enabled: bool) -> tuple[Any, Any, list[str]]:
    """A started container (settlement `enabled` or not), its api client and 8 users."""
    from walletcore.container import create_container
    from walletcore.domain.ids import new_id
    from walletcore.ports import Lifecycle
    from walletcore.services.context import Caller
    from walletcore.settings import Settings
    from walletcore.testing import CONTRACT_CATALOG

    os.environ["WALLETCORE_SETTLEMENT_ENABLED"] = "true" if enabled else "false"
    settings = Settings(home=home, repo="sql", database_url=url, prices="sandbox", venue="sandbox")
    container = create_container(settings)
    for provider in (container.storage, container.prices, container.venue):
        adapter = provider()
        if isinstance(adapter, Lifecycle):
            await adapter.start()
    container.settlements()  # built now, while the setting is the one asked for
    issued = await container.auth().create_client(f"bench-{enabled}", assets=[1])
    client = issued.client
    btc = CONTRACT_CATALOG.asset_by_id(1)
    ledger = container.gateways()[btc.chain]
    users: list[str] = []
    known = addresses.setdefault(client.client_id, {})
    for _ in range(8):
        made = await container.wallets().create(Caller(client, new_id()), password=PASSWORD)
        users.append(made.user_id)
        known[made.user_id] = made.addresses[btc.chain]
        await ledger.fund(made.addresses[btc.chain], btc, 10**20)
    desk = await container.wallets().provision_platform(client.client_id)
    await ledger.fund(desk[btc.chain], btc, 10**20)
    return container, client, users


async def pairs(
    container: Any, client: Any, users: list[str], side: str, count: int
) -> list[float]:
    from walletcore.domain.ids import new_id
    from walletcore.services.context import Caller

    trading = container.trading()
    took: list[float] = []
    for i in range(count):
        uid = users[i % len(users)]
        started = time.perf_counter()
        quote = trading.sell if side == "sell" else trading.order  # "buy", "buy+send"
        trade = await quote(Caller(client, new_id()), user_id=uid, asset_id=1, crypto_amount="0.01")
        done = await trading.approve(Caller(client, new_id()), user_id=uid, trade_id=trade.trade_id)
        took.append(time.perf_counter() - started)
        if done.status.value != "completed":
            raise RuntimeError(f"approve ended {done.status.value}")
        if side == "buy+send":  # the baseline of a delivery: the same transfer by hand
            await container.sends().platform_send(
                Caller(client, new_id()),
                request_id=new_id(),
                asset_id=1,
                recipient=addresses[client.client_id][uid],
                amount="0.01",
            )
        took[-1] = time.perf_counter() - started
    return took


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    from walletcore_sql import migrate

    home = tempfile.TemporaryDirectory(prefix="walletcore-settlebench-")
    name = None
    if args.sqlite:
        url = f"sqlite+aiosqlite:///{home.name}/bench.db"
    else:
        name = await pg_create_database(args.pg_url, "walletcore_settlebench")
        if name is None:
            raise SystemExit(f"PostgreSQL unreachable at {args.pg_url}")
        url, _ = pg_urls(args.pg_url, name)
    os.environ.setdefault("WALLETCORE_JOBS", "off")
    try:
        await migrate.upgrade_async(url)
        on = await build(url, Path(home.name) / "on", True)
        off = await build(url, Path(home.name) / "off", False)
        results: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.rounds):
            for side in ("sell", "buy"):
                for enabled, (container, client, users) in ((True, on), (False, off)):
                    took = await pairs(container, client, users, side, args.pairs)
                    results.setdefault((side, enabled), []).extend(took)
            took = await pairs(*off, "buy+send", args.pairs)
            results.setdefault(("buy+send", False), []).extend(took)
        say(
            f"storage: {'SQLite' if args.sqlite else 'PostgreSQL'}; {args.rounds} rounds of "
            f"{args.pairs} pairs, one at a time"
        )
        for side in ("sell", "buy"):
            with_, without = results[(side, True)], results[(side, False)]
            say(
                f"{side} + approve: settlement on p50 {ms(with_, 0.5):.2f} ms p90 "
                f"{ms(with_, 0.9):.2f} ms; off p50 {ms(without, 0.5):.2f} ms p90 "
                f"{ms(without, 0.9):.2f} ms; on/off p50 "
                f"{statistics.median(with_) / statistics.median(without):.2f}x"
            )
        by_hand = results[("buy+send", False)]
        say(
            f"buy + approve, settlement off, then /platform/send of the amount (the same "
            f"work by hand): p50 {ms(by_hand, 0.5):.2f} ms p90 {ms(by_hand, 0.9):.2f} ms; "
            f"settlement on / by hand p50 "
            f"{statistics.median(results[('buy', True)]) / statistics.median(by_hand):.2f}x"
        )
    finally:
        if name is not None:
            await pg_drop_database(args.pg_url, name)
        home.cleanup()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
