"""Solana deposit scan: node calls and time per slot with 10,000 watched addresses.

1. Loopback: blocks made on LiteSVM (one transaction per block, some slots skipped), then
   scanned through the JSON-RPC engine over HTTP on 127.0.0.1 as the `scan_deposits` job
   does it (ranges of `scan_span` slots, then `block(last)` for the cursor); the calls the
   node saw, by method, and the time, per slot.
2. A mainnet-sized block (synthetic: 1,300 transactions of 12 account keys, a third
   with token balances, as getBlock lists them with `"transactionDetails": "accounts"`),
   in process: its JSON read (json.loads and `block_from_json`) and its credits against
   the watched set, per block.

    PYTHONPATH=src .venv/bin/python bench/sol_scan_bench.py [blocks]
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import secrets
import sys
import time
from typing import Any

from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.solana.blocks import block_from_json
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.solana.rpc import RpcNode, rpc_client
from walletcore_chains.solana.scanning import credits
from walletcore_chains.testing.solana_rpc_node import RpcTestNode

WATCHED = 10_000
SOL, USDC = CONTRACT_CATALOG.asset_by_id(6), CONTRACT_CATALOG.asset_by_id(62)


def address() -> str:
    return str(Pubkey(secrets.token_bytes(32)))


async def make_blocks(devnet: DevnetSolanaGateway, watched: list[str], blocks: int) -> int:
    """`blocks` blocks of one SOL or USDC transfer each (a fifth to watched addresses),
    with about 5% of the slots skipped; the first slot."""
    payer = Keypair()
    node = devnet.node
    node.svm.airdrop(payer.pubkey(), 10**13)
    await devnet.fund(str(payer.pubkey()), USDC, 10**12)
    first = node.height_now()
    rng = random.Random(7)
    for n in range(blocks):
        if rng.random() < 0.05:
            node.svm.warp_to_slot(node.height_now() + 1)  # a skipped slot
        to = watched[rng.randrange(len(watched))] if n % 5 == 0 else address()
        if n % 2:
            await devnet.fund(to, USDC, 1_000 + n)  # a mint to the owner's token account
            continue
        params = TransferParams(
            from_pubkey=payer.pubkey(), to_pubkey=Pubkey.from_string(to), lamports=10**6 + n
        )
        blockhash, _ = node.latest_blockhash_now()
        message = Message.new_with_blockhash([transfer(params)], payer.pubkey(), blockhash)
        node.execute(Transaction([payer], message, blockhash))
    return first


async def loopback(blocks: int) -> None:
    devnet = DevnetSolanaGateway(validate_address)
    watched = [address() for _ in range(WATCHED)]
    first = await make_blocks(devnet, watched, blocks)
    with RpcTestNode(devnet.node) as node:
        chain = SolanaGateway(RpcNode(rpc_client(node.url, 10.0)), validate_address, devnet._mints)
        head = await chain.head()
        node.calls.clear()
        found = 0
        start = time.perf_counter()
        cursor = first - 1
        keys = dict.fromkeys(watched).keys()  # the watch list, as the core hands it
        while cursor < head.height:
            last = min(cursor + chain.scan_span, head.height)
            found += len(await chain.scan(cursor + 1, last, keys))
            assert await chain.block(last) is not None
            cursor = last
        seconds = time.perf_counter() - start
        await chain.aclose()
    slots = head.height - first + 1
    made = len(devnet.node.block_slots_now(first, head.height, "finalized"))
    calls = collections.Counter(node.calls)
    print(
        f"loopback: {slots} slots ({made} blocks, {slots - made} skipped), "
        f"{WATCHED:,} watched, scan_span {chain.scan_span}: {found} credits"
    )
    per_slot = ", ".join(f"{m} {n / slots:.3f}" for m, n in sorted(calls.items()))
    print(f"  node calls per slot: {sum(calls.values()) / slots:.3f} ({per_slot})")
    print(f"  time per slot: {seconds / slots * 1000:.2f} ms ({seconds:.2f} s in all)")


def synthetic_block(watched: list[str], transactions: int = 1_300) -> dict[str, Any]:
    """A getBlock result ("accounts") the size of a mainnet block: 12 account keys a
    transaction, a third of them with token balances; 4 transactions pay watched
    addresses."""
    rng = random.Random(11)
    mint = "EPjFWJd5AufqSSFgFujwMHefCDLhxNiZBF6nNcB5tMBS"
    entries = []
    for n in range(transactions):
        keys = [address() for _ in range(12)]
        if n % 400 == 0:
            keys[1] = watched[rng.randrange(len(watched))]
        pre = [rng.randrange(10**9, 10**12) for _ in keys]
        post = [b - (5_000 if i == 0 else 0) for i, b in enumerate(pre)]
        post[1] += 1_000 if n % 400 == 0 else 0
        tokens = []
        if n % 3 == 0:
            amount = {"amount": "5000000", "decimals": 6, "uiAmount": 5.0, "uiAmountString": "5"}
            tokens = [{"accountIndex": 2, "mint": mint, "owner": keys[3], "uiTokenAmount": amount}]
        listed = [
            {"pubkey": k, "writable": i < 4, "signer": i == 0, "source": "transaction"}
            for i, k in enumerate(keys)
        ]
        entries.append(
            {
                "transaction": {
                    "accountKeys": listed,
                    "signatures": [str(Keypair().sign_message(b"%d" % n))],
                },
                "meta": {
                    "err": None,
                    "status": {"Ok": None},
                    "fee": 5_000,
                    "preBalances": pre,
                    "postBalances": post,
                    "preTokenBalances": tokens,
                    "postTokenBalances": tokens,
                },
                "version": 0,
            }
        )
    return {
        "blockhash": address(),
        "parentSlot": 99,
        "previousBlockhash": address(),
        "blockTime": 0,
        "transactions": entries,
    }


def mainnet_sized() -> None:
    watched = [address() for _ in range(WATCHED)]
    raw = json.dumps({"jsonrpc": "2.0", "id": 0, "result": synthetic_block(watched)})
    keys = frozenset(watched)
    tokens = {"EPjFWJd5AufqSSFgFujwMHefCDLhxNiZBF6nNcB5tMBS": USDC.id}
    rounds = 10
    start = time.perf_counter()
    for _ in range(rounds):
        block = block_from_json(100, json.loads(raw)["result"])
    read = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        found = list(credits(Chain.SOLANA, block, keys, tokens, {}))
    matched = (time.perf_counter() - start) / rounds
    print(
        f"mainnet-sized block: {len(block.transactions):,} transactions, "
        f"{len(raw) / 1e6:.1f} MB of JSON, {len(found)} credits"
    )
    print(
        f"  read (json.loads + block_from_json): {read * 1000:.1f} ms; "
        f"credits against {WATCHED:,} watched: {matched * 1000:.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(loopback(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
    mainnet_sized()
