"""Bitcoin gateway figures: send latency on a regtest bitcoind (fee + prepare + sign +
assemble + broadcast, Core and Esplora backends) and the coin selection's cost for a wallet
with 1,000 coins. Run: .venv/bin/python bench/bitcoin_bench.py [sends]"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

os.environ["WALLETCORE_BITCOIN_NETWORK"] = "regtest"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "bitcoin"))

from btc_support import Wallet, make_gateway, send

from walletcore_chains.bitcoin import spend
from walletcore_chains.bitcoin.backend import Utxo
from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind
from walletcore_chains.testing.esplora_server import EsploraTestServer


def selection_cost(coins: int = 1000, rounds: int = 200) -> tuple[float, float]:
    utxos = [Utxo(f"{i:064x}", 0, 10_000 + 997 * i, 100 + i % 50) for i in range(coins)]
    total = sum(u.value for u in utxos)
    start = time.perf_counter()
    for i in range(rounds):
        spend.quote(utxos, total // 3 + i, 22, 2.0)  # needs hundreds of coins
    quote_ms = (time.perf_counter() - start) / rounds * 1000
    start = time.perf_counter()
    for i in range(rounds):
        spend.pay(utxos, "a", "b", 294, total // 3 + i, 50_000, 22)
    return quote_ms, (time.perf_counter() - start) / rounds * 1000


async def latency(node: Bitcoind, backend: str, url: str, sends: int) -> list[float]:
    gw = make_gateway(backend, url)
    alice = Wallet()
    node.fund(alice.address, "5")
    node.mine(1)
    out = []
    try:
        for _ in range(sends):
            start = time.perf_counter()
            await send(gw, alice, Wallet().address, 100_000)
            out.append((time.perf_counter() - start) * 1000)
    finally:
        await gw.aclose()
    return out


def main() -> None:
    sends = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    quote_ms, pay_ms = selection_cost()
    print(f"coin selection, 1,000 coins: quote {quote_ms:.2f} ms, pay {pay_ms:.2f} ms")
    binary = find_bitcoind()
    if binary is None:
        print("no bitcoind: send latency skipped (python3 dev.py test installs one)")
        return
    node = Bitcoind(binary).start()
    try:
        node.mine(101)
        with EsploraTestServer(node.plain_url, (node.user, node.password)) as esplora:
            for backend, url in (("core", node.url), ("esplora", esplora.url)):
                times = asyncio.run(latency(node, backend, url, sends))
                times.sort()
                print(
                    f"send latency, {backend}, regtest, {sends} sends (chained change): "
                    f"median {statistics.median(times):.1f} ms, p90 {times[int(len(times) * 0.9) - 1]:.1f} ms"
                )
    finally:
        node.stop()


if __name__ == "__main__":
    main()
