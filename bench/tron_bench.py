"""TRON gateway on the loopback node: send latency (quote, prepare, sign, broadcast) of TRX
and USDT, and the cost of a `/fee` quote, measured in process over HTTP on 127.0.0.1.

    .venv/bin/python bench/tron_bench.py [rounds]
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import sys
import time

from walletcore.ports import Transfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains import curves
from walletcore_chains.testing.tron_node import TronTestNode
from walletcore_chains.tron import address_of, validate_address
from walletcore_chains.tron.client import TronClient
from walletcore_chains.tron.gateway import TronGateway

TRX, USDT = CONTRACT_CATALOG.asset_by_id(4), CONTRACT_CATALOG.asset_by_id(41)


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.1f} ms"


async def main(rounds: int) -> None:
    with TronTestNode() as node:
        gw = TronGateway(TronClient(node.url), validate_address, tokens=node.tokens)
        secret = secrets.token_bytes(32)
        sender = address_of(curves.public_key("secp256k1", secret))
        recipient = address_of(curves.public_key("secp256k1", secrets.token_bytes(32)))
        node.fund(sender, 10**12)
        node.fund(recipient, 1)
        node.fund_token(sender, 41, 10**12)
        for asset in (TRX, USDT):
            fees, sends = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                quote = await gw.fee(sender, recipient, asset, 1000)
                fees.append(time.perf_counter() - start)
                unsigned = await gw.prepare(Transfer(asset, sender, recipient, 1000, sender), quote)
                signed = gw.assemble(
                    unsigned, {sender: curves.sign("secp256k1", secret, unsigned.payload)}
                )
                await gw.broadcast(signed)
                sends.append(time.perf_counter() - start)
            print(f"{asset.symbol}: /fee {ms(fees)}; send (fee+prepare+sign+broadcast) {ms(sends)}")
        await gw.aclose()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
