#!/usr/bin/env python3
"""What the nonce reservation of EVM sends costs (docs/chains.md, "Nonces").

    python bench/nonces_bench.py                      # PostgreSQL at the local `test` db too
    python bench/nonces_bench.py --no-pg --cycles 500 --sends 20

Two parts, each a program printing figures (no assertions on time):

1. Lease cycle: one `NonceBook.reserve` + `accepted` on one address, `--cycles` times in a
   row, for each store of the leases: none (one process only), in-process leases'
   asyncio locks, lock files beside an SQLite file (`flock`), and PostgreSQL advisory
   locks on a connection of their own (skipped with --no-pg or when it is not reachable).
   Prints p50/p99 per cycle and the ratio to the no-lease baseline of the same run.
2. Devnet sends (eth-tester, in process): `--sends` ETH transfers fired at once from ONE
   address (they queue on its nonce) against the same number from as many addresses (no
   queue), each through prepare -> sign -> assemble -> broadcast, with the in-memory and
   SQLite leases. Prints wall time, sends per second and the one-address/many ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("BCL_DATA_DIR", tempfile.mkdtemp(prefix="walletcore-bench-bcl-"))

from eth_account import Account

from walletcore.domain.assets import Chain
from walletcore.ports import NonceLeases, Transfer
from walletcore.testing import CONTRACT_CATALOG, LocalNonceLeases
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.nonces import NonceBook
from walletcore_chains.keystore import ChainKey
from walletcore_sql.engine import sqlite_url
from walletcore_sql.nonces import nonce_leases
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url

ETH = CONTRACT_CATALOG.asset_by_id(2)
ELSEWHERE = "0x52908400098527886E0F7030069857D2E4169EE7"
CHAIN_KEY = "eip155:bench"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1_000, help="lease cycles per store")
    parser.add_argument("--sends", type=int, default=20, help="concurrent devnet sends")
    parser.add_argument("--rounds", type=int, default=3, help="devnet rounds (best is shown)")
    parser.add_argument("--url", default=pg_test_url(), help="PostgreSQL URL (%(default)s)")
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    return parser.parse_args()


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- 1. lease cycles -------------------------------------------------------------------------
async def cycles(book: NonceBook, count: int) -> list[float]:
    address = Account.create().address
    node_count = 0

    async def pending() -> int:
        return node_count

    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        nonce = await book.reserve(address, pending)
        await book.accepted(address, nonce)
        times.append(time.perf_counter() - start)
        node_count = nonce + 1
    return times


async def lease_part(args: argparse.Namespace, workdir: Path) -> None:
    print(f"1. lease cycle: reserve + accepted on one address, {args.cycles} in a row")
    stores: list[tuple[str, Callable[[], Awaitable[tuple[NonceLeases | None, Any]]]]] = []

    async def none() -> tuple[NonceLeases | None, Any]:
        return None, None

    async def memory() -> tuple[NonceLeases | None, Any]:
        return LocalNonceLeases(), None

    async def sqlite() -> tuple[NonceLeases | None, Any]:
        storage = SqlStorage(sqlite_url(workdir / "leases.db"), migrate=True)
        await storage.start()
        return nonce_leases(storage.database), storage

    async def postgres() -> tuple[NonceLeases | None, Any]:
        schema = await create_schema_async(args.url)
        from walletcore_sql import migrate

        await asyncio.to_thread(migrate.upgrade, args.url, schema=schema)
        storage = SqlStorage(args.url, migrate=False, schema=schema)
        await storage.start()
        return nonce_leases(storage.database), (storage, schema)

    stores += [("none (1 process)", none), ("memory", memory), ("sqlite flock", sqlite)]
    if not args.no_pg:
        stores.append(("postgresql", postgres))

    baseline = 0.0
    print(f"   {'store':<18} {'p50 us':>9} {'p99 us':>9} {'per s':>9} {'x none':>7}")
    for name, make in stores:
        try:
            leases, owner = await make()
        except Exception as exc:  # noqa: BLE001 - a bench skips a store it cannot reach
            print(f"   {name:<18} skipped: {type(exc).__name__}: {exc}")
            continue
        try:
            book = NonceBook(leases=leases, chain=CHAIN_KEY) if leases else NonceBook()
            await cycles(book, min(50, args.cycles))  # warm-up: connections, files
            times = await cycles(book, args.cycles)
        finally:
            if isinstance(owner, tuple):
                await owner[0].aclose()
                await drop_schema_async(args.url, owner[1])
            elif owner is not None:
                await owner.aclose()
        p50 = statistics.median(times)
        baseline = baseline or p50
        print(
            f"   {name:<18} {p50 * 1e6:>9.1f} {pct(times, 0.99) * 1e6:>9.1f} "
            f"{len(times) / sum(times):>9.0f} {p50 / baseline:>7.1f}"
        )


# -- 2. devnet sends -------------------------------------------------------------------------
def wallet() -> tuple[str, ChainKey]:
    account = Account.create()
    return account.address, ChainKey(Chain.ETHEREUM, bytearray(account.key))


async def one_send(gateway: EvmGateway, sender: tuple[str, ChainKey], units: int) -> str:
    address, key = sender
    quote = await gateway.fee(address, ELSEWHERE, ETH, units, fee_payer=address)
    unsigned = await gateway.prepare(
        Transfer(ETH, address, ELSEWHERE, units, fee_payer=address), quote
    )
    signed = gateway.assemble(unsigned, {address: key.sign(unsigned.payload_for(address))})
    return await gateway.broadcast(signed)


async def burst(gateway: EvmGateway, senders: list[tuple[str, ChainKey]], count: int) -> float:
    start = time.perf_counter()
    hashes = await asyncio.gather(
        *(one_send(gateway, senders[i % len(senders)], 10**12 + i) for i in range(count))
    )
    elapsed = time.perf_counter() - start
    if len(set(hashes)) != count:  # a bench that measured a broken run would mislead
        raise SystemExit("devnet burst: fewer distinct transactions than sends")
    return elapsed


async def devnet_part(args: argparse.Namespace, workdir: Path) -> None:
    print(f"\n2. devnet (eth-tester): {args.sends} ETH sends at once, best of {args.rounds}")
    chain = DevnetEvmGateway(Chain.ETHEREUM, validate_address)
    storage = SqlStorage(sqlite_url(workdir / "sends.db"), migrate=True)
    await storage.start()
    try:
        print(f"   {'leases':<8} {'senders':>8} {'wall ms':>9} {'sends/s':>9} {'x many':>7}")
        local: NonceLeases = LocalNonceLeases()
        for name, leases in (("memory", local), ("sqlite", nonce_leases(storage.database))):
            gateway = EvmGateway(
                chain.config,
                chain.w3,
                validate_address,
                tokens={},
                nonces=NonceBook(leases=leases, chain=CHAIN_KEY),
            )
            results: dict[str, float] = {}
            for label, size in (("many", args.sends), ("one", 1)):
                best = float("inf")
                for _ in range(args.rounds):
                    senders = [wallet() for _ in range(size)]
                    for address, _key in senders:
                        await chain.fund(address, ETH, 10**18)
                    best = min(best, await burst(gateway, senders, args.sends))
                results[label] = best
                print(
                    f"   {name:<8} {size:>8} {best * 1e3:>9.1f} {args.sends / best:>9.1f} "
                    f"{best / results['many']:>7.2f}"
                )
    finally:
        await storage.aclose()


async def main() -> None:
    args = parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    with tempfile.TemporaryDirectory(prefix="walletcore-nonces-bench-") as tmp:
        await lease_part(args, Path(tmp))
        await devnet_part(args, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
