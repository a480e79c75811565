"""The deposit watch's own cost per block, with 10,000 watched addresses (docs/events.md,
"Cost per block").

    .venv/bin/python bench/deposit_scan_bench.py [--addresses 10000] [--blocks 200]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

What the core does around a chain's scanner, on SQLite and PostgreSQL as `walletcore
serve` builds them: 10,000 users, each with an ETHEREUM address, watched; a chain (the
scanning fake of `walletcore.testing.chains`, which answers from memory, so only the core
and the storage are measured) of `--blocks` new blocks with one credit to a watched address
in each; one run of the watch from the cursor to the head (reading the watch list, storing
each range with its cursor, the deposits with their audit entries and events, then
settling them to `confirmed`). Printed: the watch list's read, the run's seconds, and the
core's cost per block and per deposit. The node's side (the scan calls) is each chain's
own bench: bench/evm_scan_bench.py, btc_scan_bench.py, sol_scan_bench.py, trx_scan_bench.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


async def measure(label: str, settings: Any, addresses: int, blocks: int) -> dict[str, float]:
    from dependency_injector import providers

    from walletcore.container import create_container
    from walletcore.domain.assets import CONTRACT_CHAINS, Chain
    from walletcore.domain.clients import User
    from walletcore.domain.ids import new_id
    from walletcore.domain.wallet import WalletOwner, WalletRecord
    from walletcore.ports import Lifecycle
    from walletcore.testing.chains import FollowedFakeGateway, ScanningFakeGateway

    chain = ScanningFakeGateway(Chain.ETHEREUM, confirmations=12, scan_span=100)
    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    gateways[Chain.ETHEREUM] = chain
    container = create_container(settings)
    container.gateways.override(providers.Object(gateways))
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
    try:
        client = (await container.auth().create_client("bench")).client
        now = datetime.now(UTC)
        watched = []
        for start in range(0, addresses, 500):
            async with storage.write() as unit:
                for n in range(start, min(start + 500, addresses)):
                    uid = new_id()
                    address = "0x" + f"{n:040x}"
                    watched.append(address)
                    await unit.wallets.add_user(
                        User(user_id=uid, client_id=client.client_id, created_at=now),
                        WalletRecord(
                            client_id=client.client_id,
                            owner=WalletOwner.USER,
                            user_id=uid,
                            sealed=b"",
                            addresses={Chain.ETHEREUM: address},
                            created_at=now,
                        ),
                    )
        watch = container.deposit_watch()
        await watch.scan(Chain.ETHEREUM)  # places the cursor
        reads = []
        for _ in range(5):
            began = time.perf_counter()
            async with storage.read() as unit:
                listed = await unit.deposits.watchlist(Chain.ETHEREUM)
            reads.append(time.perf_counter() - began)
        assert len(listed) == addresses
        for n in range(blocks):
            chain.pay(watched[(n * 7919) % addresses], 2, 10**15 + n)
            chain.mine()
        chain.mine(12)  # every credit deep enough to confirm in the same run
        began = time.perf_counter()
        report = await watch.scan(Chain.ETHEREUM)
        seconds = time.perf_counter() - began
        assert report.error is None, report.error
        assert report.found == blocks and report.confirmed == blocks, report
        idle = chain.blocks[-1][0].height
        chain.mine(100)  # blocks with nothing for the watched addresses
        began = time.perf_counter()
        empty = await watch.scan(Chain.ETHEREUM)
        empty_seconds = time.perf_counter() - began
        assert empty.blocks == 100 and empty.cursor == idle + 100
        figures = {
            "watchlist_ms": min(reads) * 1000,
            "run_s": seconds,
            "per_block_with_deposit_ms": seconds / (blocks + 12) * 1000,
            "per_deposit_ms": seconds / blocks * 1000,
            "per_empty_block_ms": empty_seconds / 100 * 1000,
        }
        print(
            f"{label}: {addresses} watched, watch list read {figures['watchlist_ms']:.1f} ms; "
            f"{blocks} blocks each with a deposit (found and confirmed in one run): "
            f"{seconds:.2f} s, {figures['per_deposit_ms']:.2f} ms a deposit; 100 empty "
            f"blocks: {figures['per_empty_block_ms']:.3f} ms a block"
        )
        return figures
    finally:
        if isinstance(storage, Lifecycle):
            await storage.aclose()


async def main(args: argparse.Namespace) -> None:
    from walletcore.settings import Settings
    from walletcore_sql import migrate

    os.environ["WALLETCORE_JOBS"] = "off"  # the run is the bench's, not a background job's

    with tempfile.TemporaryDirectory(prefix="walletcore-depbench-") as home:
        settings = Settings(home=Path(home), repo="sql")
        await measure("SQLite", settings, args.addresses, args.blocks)
    if args.pg_url:
        from http_bench import pg_create_database, pg_drop_database, pg_urls

        name = await pg_create_database(args.pg_url, "walletcore_depbench")
        if name is None:
            return
        url, _ = pg_urls(args.pg_url, name)
        try:
            await migrate.upgrade_async(url)
            with tempfile.TemporaryDirectory(prefix="walletcore-depbench-") as home:
                settings = Settings(home=Path(home), repo="sql", database_url=url)
                await measure("PostgreSQL", settings, args.addresses, args.blocks)
        finally:
            await pg_drop_database(args.pg_url, name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addresses", type=int, default=10_000)
    parser.add_argument("--blocks", type=int, default=200)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    asyncio.run(main(parser.parse_args()))
