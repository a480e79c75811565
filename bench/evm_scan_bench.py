"""The EVM deposit scan (`walletcore_chains.evm.deposits`) on anvil over loopback HTTP:
node calls and time per block with many watched addresses.

    .venv/bin/python bench/evm_scan_bench.py [--watched 10000] [--blocks 100]
        [--unrelated 40] [--credits 6] [--empty 500] [--rounds 3] [--call-tracer]

Builds a chain on a fresh anvil: `--blocks` blocks, each with `--unrelated` native
transfers to addresses nobody watches and `--credits` credits to watched ones (native
transfers, token transfers, and value forwarded inside a contract call, in turn), then
`--empty` empty blocks. Scans each part `--rounds` times, every watched address at once,
in spans of 500 blocks (the default `scan_span`): the busy blocks with `trace_block`, and
without a tracer (a node that has none: transactions' own value and receipts), with
`--call-tracer` once with `debug_traceBlockByHash` and `callTracer` too (geth's way; slow
on anvil, which replays the block for each transaction), and the empty blocks with
`trace_block`. Prints, per way, the median milliseconds per block and the node calls per
block by method.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from eth_abi.abi import encode as abi_encode
from eth_account import Account
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import rpc_web3
from walletcore_chains.evm.rows import TRANSFER_SELECTOR
from walletcore_chains.testing.anvil import AnvilNode

ETH, USDT = CONTRACT_CATALOG.asset_by_id(2), CONTRACT_CATALOG.asset_by_id(21)
FORWARDER = (
    Path(__file__).parent.parent / "tests" / "integration" / "evm" / "contracts" / "Forwarder.vy"
)
SPAN = 500


def forwarder(node: AnvilNode) -> str:
    import vyper  # type: ignore[import-untyped]

    code = vyper.compile_code(FORWARDER.read_text(), output_formats=["bytecode"])["bytecode"]
    tx = {"from": node.funder, "data": code, "gas": hex(1_000_000)}
    return to_checksum_address(
        node.wait_receipt(node.call("eth_sendTransaction", tx))["contractAddress"]
    )


def build(node: AnvilNode, watched: list[str], blocks: int, unrelated: int, credits: int) -> int:
    """The busy blocks; the number of credits to watched addresses they hold."""
    contract = forwarder(node)
    node.fund(to_checksum_address(node.funder), USDT, 10**12)
    forward = keccak(text="forward(address)")[:4]
    node.automine(False)
    paid = 0
    for b in range(blocks):
        for _ in range(unrelated):
            to = Account.create().address
            node.call("eth_sendTransaction", {"from": node.funder, "to": to, "value": "0x1"})
        for c in range(credits):
            to = watched[(b * credits + c) * 7919 % len(watched)]
            tx: dict[str, Any] = {"from": node.funder}
            if c % 3 == 0:
                tx |= {"to": to, "value": hex(10**15)}
            elif c % 3 == 1:
                data = TRANSFER_SELECTOR + abi_encode(["address", "uint256"], [to, 5])
                tx |= {"to": node.tokens[USDT.id], "data": "0x" + data.hex(), "gas": hex(100_000)}
            else:
                data = forward + abi_encode(["address"], [to])
                tx |= {
                    "to": contract,
                    "value": "0x9",
                    "data": "0x" + data.hex(),
                    "gas": hex(100_000),
                }
            node.call("eth_sendTransaction", tx)
            paid += 1
        node.mine(1)
    node.automine(True)
    return paid


def counted(gateway: EvmGateway) -> Counter[str]:
    """Every JSON-RPC request the gateway's provider sends, by method."""
    calls: Counter[str] = Counter()
    provider: Any = gateway.w3.provider
    original = provider.make_request

    async def make_request(method: str, params: Any) -> Any:
        calls[method] += 1
        return await original(method, params)

    provider.make_request = make_request
    return calls


async def measure(
    label: str, url: str, node: AnvilNode, watched: list[str], first: int, last: int,
    rounds: int, tracers: list[str],
) -> None:  # fmt: skip
    seconds, found = [], 0
    calls: Counter[str] = Counter()
    for _ in range(rounds):
        gateway = EvmGateway(
            evm_config(Chain.ETHEREUM, "mainnet", node.tokens),
            rpc_web3(url, 60.0, Chain.ETHEREUM),
            validate_address,
        )
        calls = counted(gateway)
        gateway.scanner.tracers = list(tracers)
        if not tracers:
            gateway.scanner.traces = False
        start = time.perf_counter()
        found = 0
        for low in range(first, last + 1, SPAN):
            found += len(await gateway.scan(low, min(low + SPAN - 1, last), watched))
        seconds.append(time.perf_counter() - start)
        await gateway.aclose()
    count = last - first + 1
    per_block = statistics.median(seconds) / count
    methods = ", ".join(f"{m} {n / count:.3f}" for m, n in sorted(calls.items()))
    print(
        f"{label}: {count} blocks, {len(watched)} watched, {found} credits; "
        f"{per_block * 1000:.2f} ms/block (median of {rounds}); "
        f"calls/block {sum(calls.values()) / count:.3f}: {methods}"
    )


async def main(args: argparse.Namespace) -> None:
    watched = [Account.create().address for _ in range(args.watched)]
    with AnvilNode(Chain.ETHEREUM, block_time=None) as node:
        first = node.block_number() + 1
        start = time.perf_counter()
        paid = build(node, watched, args.blocks, args.unrelated, args.credits)
        last = node.block_number()
        print(
            f"built {last - first + 1} blocks ({args.unrelated} unrelated transactions and "
            f"{args.credits} credits each, {paid} credits) in {time.perf_counter() - start:.1f} s"
        )
        busy = (node.url, node, watched, first, last)
        await measure("busy, trace_block", *busy, args.rounds, ["trace_block"])
        await measure("busy, untraced", *busy, args.rounds, [])
        if args.call_tracer:
            await measure("busy, callTracer", *busy, 1, ["debug_traceBlockByHash"])
        node.mine(args.empty)
        empty = (node.url, node, watched, last + 1, node.block_number())
        await measure("empty, trace_block", *empty, args.rounds, ["trace_block"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watched", type=int, default=10_000)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--unrelated", type=int, default=40)
    parser.add_argument("--credits", type=int, default=6)
    parser.add_argument("--empty", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--call-tracer", action="store_true", help="also geth's way, once")
    asyncio.run(main(parser.parse_args()))
