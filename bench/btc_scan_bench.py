"""Bitcoin deposit scan figures on a regtest bitcoind, 10,000 watched addresses: node
requests (HTTP) and calls (JSON-RPC methods, batches counted by item) and time per block,
on the Core and Esplora backends; a range of blocks in one scan; a large block read raw
(`getblock <hash> 0`, parsed here) against the node's JSON (`getblock <hash> 2`); the
Core mempool read twice (each transaction decoded once).

Run: .venv/bin/python bench/btc_scan_bench.py [blocks]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from decimal import Decimal
from typing import Any

os.environ["WALLETCORE_BITCOIN_NETWORK"] = "regtest"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "bitcoin"))

import httpx
from btc_support import make_gateway

from walletcore_chains import bclib
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.bitcoin.rawblocks import parse_block
from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind
from walletcore_chains.testing.esplora_server import EsploraTestServer

WATCHED = 10_000


class Counter:
    """HTTP requests of a gateway's backend, and the calls they carried."""

    def __init__(self, gw: BitcoinGateway) -> None:
        backend: Any = gw.backend
        client: httpx.AsyncClient = (
            backend._rpc._client if backend.name == "core" else backend._client
        )
        self.requests = 0
        self.calls = 0

        async def hook(request: httpx.Request) -> None:
            self.requests += 1
            body = json.loads(request.content) if request.method == "POST" else None
            self.calls += len(body) if isinstance(body, list) else 1

        client.event_hooks = {"request": [hook], "response": []}

    def take(self) -> tuple[int, int]:
        out = (self.requests, self.calls)
        self.requests = self.calls = 0
        return out


def addresses(count: int) -> list[str]:
    encode = bclib.encoding().pubkeyhash_to_addr_bech32
    return [encode(os.urandom(20), prefix="bcrt", witver=0) for _ in range(count)]


def fill_blocks(node: Bitcoind, watched: list[str], blocks: int) -> tuple[int, int]:
    """`blocks` blocks of some 30 transactions and 150 outputs each, 50 of them to watched
    addresses; the first and last heights."""
    first = int(node.call("getblockcount")) + 1
    strangers = addresses(blocks * 100)
    for b in range(blocks):
        outputs = {a: "0.0001" for a in watched[b * 50 : (b + 1) * 50]}
        outputs |= {a: "0.0001" for a in strangers[b * 100 : b * 100 + 50]}
        node.call("sendmany", "", outputs, wallet="miner")
        for a in strangers[b * 100 + 50 : b * 100 + 78]:
            node.fund(a, "0.001")
        node.mine(1)
    return first, first + blocks - 1


def big_block(node: Bitcoind) -> str:
    """One block of about 3,000 outputs (three transactions of 1,000) and 200 payments."""
    for _ in range(3):
        node.call("sendmany", "", {a: "0.00001" for a in addresses(1_000)}, wallet="miner")
    for a in addresses(200):
        node.fund(a, "0.0002")
    return node.mine(1)[0]


async def scan_figures(gw: BitcoinGateway, first: int, last: int, watched: list[str]) -> None:
    counter = Counter(gw)
    start = time.perf_counter()
    await gw.scan(first, first, watched)  # the watched addresses' scripts, computed once
    cold = time.perf_counter() - start
    counter.take()
    per_block = []
    for height in range(first, last + 1):
        start = time.perf_counter()
        found = await gw.scan(height, height, watched)
        per_block.append(time.perf_counter() - start)
        assert len(found) == 50, len(found)
    requests, calls = counter.take()
    blocks = last - first + 1
    print(
        f"{gw.backend.name:8} one block a scan, {WATCHED:,} watched: "
        f"{requests / blocks:.1f} requests, {calls / blocks:.1f} calls, "
        f"{sum(per_block) / blocks * 1000:.1f} ms per block (first scan {cold * 1000:.0f} ms: "
        "the addresses' locking scripts)"
    )
    start = time.perf_counter()
    found = await gw.scan(first, last, watched)
    took = time.perf_counter() - start
    requests, calls = counter.take()
    assert len(found) == 50 * blocks
    print(
        f"{gw.backend.name:8} {blocks} blocks in one scan: {requests} requests, {calls} calls, "
        f"{took * 1000:.0f} ms ({took / blocks * 1000:.1f} ms per block)"
    )


async def big_block_figures(
    gw: BitcoinGateway, node: Bitcoind, block_hash: str, watched: list[str]
) -> None:
    height = int(node.call("getblockheader", block_hash)["height"])
    info = node.call("getblock", block_hash, 1)
    counter = Counter(gw)
    start = time.perf_counter()
    await gw.scan(height, height, watched)
    took = time.perf_counter() - start
    requests, calls = counter.take()
    print(
        f"{gw.backend.name:8} a block of {info['nTx']} transactions, "
        f"{sum(len(t['vout']) for t in node.call('getblock', block_hash, 2)['tx'])} outputs "
        f"({info['size'] // 1000} kB): {requests} requests, {calls} calls, {took * 1000:.0f} ms"
    )


def raw_against_json(node: Bitcoind, block_hash: str, rounds: int = 5) -> None:
    client = httpx.Client(auth=(node.user, node.password), timeout=120)

    def call(*params: Any) -> tuple[Any, int]:
        body = {"jsonrpc": "1.0", "id": 1, "method": "getblock", "params": list(params)}
        response = client.post(node.plain_url, content=json.dumps(body))
        return json.loads(response.content, parse_float=Decimal)["result"], len(response.content)

    for verbosity in (0, 2):
        start = time.perf_counter()
        for _ in range(rounds):
            result, size = call(block_hash, verbosity)
            if verbosity == 0:
                parse_block(bytes.fromhex(result))
        took = (time.perf_counter() - start) / rounds
        how = "raw hex, parsed here" if verbosity == 0 else "JSON with addresses, decoded"
        print(f"getblock {verbosity} ({how}): {size // 1000} kB, {took * 1000:.1f} ms a block")
    raw = bytes.fromhex(call(block_hash, 0)[0])
    start = time.perf_counter()
    for _ in range(rounds):
        parse_block(raw)
    took = (time.perf_counter() - start) / rounds
    print(
        f"parse_block alone: {took * 1000:.1f} ms for {len(raw) // 1000} kB "
        f"({took / len(raw) * 1e9:.1f} ms per MB)"
    )
    client.close()


async def mempool_figures(gw: BitcoinGateway, node: Bitcoind, watched: list[str]) -> None:
    node.mine(1)
    assert await gw.mempool(watched) == []  # empty; the watched scripts are computed
    for a in addresses(500):
        node.fund(a, "0.0002")
    node.fund(watched[-1], "0.01")
    counter = Counter(gw)
    for label in ("first read", "second read"):
        start = time.perf_counter()
        found = await gw.mempool(watched)
        took = time.perf_counter() - start
        requests, calls = counter.take()
        assert len(found) == 1
        print(
            f"core     mempool of {len(node.call('getrawmempool'))} transactions, "
            f"{label}: {requests} requests, {calls} calls, {took * 1000:.0f} ms"
        )
    node.mine(1)


async def run(node: Bitcoind, esplora: EsploraTestServer, blocks: int) -> None:
    watched = addresses(WATCHED)
    first, last = fill_blocks(node, watched, blocks)
    core, esplora_gw = make_gateway("core", node.url), make_gateway("esplora", esplora.url)
    try:
        for gw in (core, esplora_gw):
            await scan_figures(gw, first, last, watched)
        block_hash = big_block(node)
        for gw in (core, esplora_gw):
            await big_block_figures(gw, node, block_hash, watched)
        raw_against_json(node, block_hash)
        await mempool_figures(core, node, watched)
    finally:
        await core.aclose()
        await esplora_gw.aclose()


def main() -> None:
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    binary = find_bitcoind()
    if binary is None:
        print("no bitcoind: python3 dev.py test installs one (or set WALLETCORE_BITCOIND)")
        return
    node = Bitcoind(binary).start()
    try:
        node.mine(400)  # 300 mature coins: the payments spend no unconfirmed change
        with EsploraTestServer(node.plain_url, (node.user, node.password)) as esplora:
            asyncio.run(run(node, esplora, blocks))
    finally:
        node.stop()


if __name__ == "__main__":
    main()
