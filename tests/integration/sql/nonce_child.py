"""Run by test_sql_nonce_leases in a subprocess: one signing process of a deployment,
taking EVM nonces for one address from a node that always answers a stale pending count.

    python nonce_child.py URL SCHEMA|- ADDRESS COUNT [hold]

Prints READY, waits for a line on stdin (so every process starts at once), then takes
nonces until COUNT were accepted, giving some back unused (a failed signing) on the way,
printing `NONCE n` for each accepted one. With `hold`: then reserves one more, prints
`HELD n` and waits for ever, so the test can kill it holding the lease.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from walletcore_chains.evm.nonces import NonceBook
from walletcore_sql.nonces import nonce_leases
from walletcore_sql.storage import SqlStorage

CHAIN = "eip155:1"


async def stale_node() -> int:
    """A load-balanced node that has not seen any of this address's transactions."""
    return 0


async def main(url: str, schema: str, address: str, count: str, mode: str = "") -> None:
    storage = SqlStorage(url, migrate=False, schema=None if schema == "-" else schema)
    book = NonceBook(leases=nonce_leases(storage.database), chain=CHAIN)
    rng = random.Random(os.getpid())
    print("READY", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    accepted = 0
    while accepted < int(count):
        nonce = await book.reserve(address, stale_node)
        await asyncio.sleep(rng.uniform(0, 0.003))  # signing, storing, broadcasting
        if rng.random() < 0.2:
            await book.release(address, nonce)  # a wrong password, say: nothing sent
            continue
        print(f"NONCE {nonce}", flush=True)
        await book.accepted(address, nonce)
        accepted += 1
    if mode == "hold":
        nonce = await book.reserve(address, stale_node)
        print(f"HELD {nonce}", flush=True)
        await asyncio.Event().wait()
    await storage.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
