"""TRON deposit scan on the loopback node: node requests and time per block for a range of
blocks holding TRX and USDT transfers, 10,000 watched addresses, over HTTP on 127.0.0.1.

    .venv/bin/python bench/trx_scan_bench.py [blocks] [transfers per block] [watched]
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections import Counter

from walletcore.ports import Transfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains import curves
from walletcore_chains.testing.tron_node import TronTestNode, b58
from walletcore_chains.tron import address_of, deposits, validate_address
from walletcore_chains.tron.client import TronClient
from walletcore_chains.tron.gateway import TronGateway

TRX, USDT = CONTRACT_CATALOG.asset_by_id(4), CONTRACT_CATALOG.asset_by_id(41)


async def main(blocks: int, per_block: int, watched_count: int) -> None:
    with TronTestNode(auto_pack=False) as node:
        gw = TronGateway(TronClient(node.url), validate_address, tokens=node.tokens)
        secret = secrets.token_bytes(32)
        sender = address_of(curves.public_key("secp256k1", secret))
        node.fund(sender, 10**15)
        node.fund_token(sender, USDT.id, 10**15)
        watched = [b58(b"\x41" + secrets.token_bytes(20)) for _ in range(watched_count)]
        start = node.blocks[-1][0]
        sent = 0
        for n in range(blocks):
            for k in range(per_block):
                asset = TRX if k % 2 == 0 else USDT
                # half the transfers to a watched address, half to someone else
                to = (
                    watched[(n * per_block + k) % len(watched)]
                    if k % 4 < 2
                    else b58(b"\x41" + secrets.token_bytes(20))
                )
                quote = await gw.fee(sender, to, asset, 1_000 + k)
                unsigned = await gw.prepare(Transfer(asset, sender, to, 1_000 + k, sender), quote)
                signature = curves.sign("secp256k1", secret, unsigned.payload)
                await gw.broadcast(gw.assemble(unsigned, {sender: signature}))
                sent += 1
            node.pack(together=True)
        first, last = start + 1, node.blocks[-1][0]
        began = time.perf_counter()
        deposits.Watch.of(watched)
        decode_ms = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        deposits.Watch.of(watched)
        watch_ms = (time.perf_counter() - began) * 1000
        node.paths.clear()
        began = time.perf_counter()
        found = await gw.scan(first, last, watched)
        took = time.perf_counter() - began
        calls = Counter(node.paths)
        count = last - first + 1
        print(
            f"{count} blocks, {sent} transfers ({per_block} a block, TRX and USDT), "
            f"{len(watched)} watched addresses: {len(found)} credits found"
        )
        print(
            f"  one scan of the range: {took * 1000:.0f} ms, {took / count * 1000:.2f} ms a block"
        )
        print(
            f"  node requests: {sum(calls.values())} ({dict(calls)}), "
            f"{sum(calls.values()) / count:.2f} a block"
        )
        print(
            f"  the watch list: {decode_ms:.0f} ms to decode {len(watched):,} addresses the first "
            f"time, {watch_ms:.1f} ms at each scan after (kept)"
        )
        node.paths.clear()
        began = time.perf_counter()
        for height in range(first, last + 1):
            await gw.scan(height, height, watched)
        took = time.perf_counter() - began
        print(
            f"  block by block: {took / count * 1000:.2f} ms a block, "
            f"{len(node.paths) / count:.2f} requests a block"
        )
        await gw.aclose()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    defaults = [100, 8, 10_000]
    asyncio.run(main(*(args + defaults[len(args) :])))
