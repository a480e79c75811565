"""The EVM deposit scan (`walletcore_chains.evm.deposits`, the `DepositScanner` of
`EvmGateway`) on anvil: native transfers, token Transfer logs, value moved inside contract
calls (a Vyper forwarder, `contracts/Forwarder.vy`, deployed per test) read from anvil's
call tracer, reverted calls and failed transactions that move nothing, 1,500 watched
addresses in two log queries, a node that refuses wide log ranges (`RpcProxy` in front of
anvil) and one without a tracer or block receipts, a reorg (`anvil_snapshot` /
`anvil_revert`), the pool, a node that fails mid-scan; then BASECHAIN, a chain the family
builds, the in-process devnet (eth-tester: no tracer, no pool), and the core's deposit
watch on the gateway (seen, confirmed at depth, reversed by a reorg)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from eth_abi.abi import encode as abi_encode
from eth_account import Account
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import NodeUnavailable
from walletcore.ports import MEMPOOL, DepositScanner
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import rpc_web3
from walletcore_chains.evm.rows import TRANSFER_SELECTOR
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_chains.testing.rpc_proxy import RpcProxy

ETH, USDT, USDC = (CONTRACT_CATALOG.asset_by_id(i) for i in (2, 21, 22))
ZERO = "0x0000000000000000000000000000000000000000"
FORWARDER = Path(__file__).parent / "contracts" / "Forwarder.vy"
needs_anvil = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)
pytestmark = needs_anvil


# -- fixtures and helpers ---------------------------------------------------------------
@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil per test, mining a block for each transaction as it arrives."""
    with AnvilNode(Chain.ETHEREUM, block_time=None) as started:
        yield started


@pytest.fixture
def proxy(node: AnvilNode) -> Iterator[RpcProxy]:
    with RpcProxy(node.url) as started:
        yield started


def gateway_on(url: str, node: AnvilNode) -> EvmGateway:
    config = evm_config(Chain.ETHEREUM, "mainnet", node.tokens)
    return EvmGateway(config, rpc_web3(url, 10.0, Chain.ETHEREUM), validate_address)


@pytest.fixture
async def gateway(node: AnvilNode) -> AsyncIterator[EvmGateway]:
    made = gateway_on(node.url, node)
    yield made
    await made.aclose()


@pytest.fixture
async def proxied(node: AnvilNode, proxy: RpcProxy) -> AsyncIterator[EvmGateway]:
    """The gateway on the proxy in front of the test's anvil."""
    made = gateway_on(proxy.url, node)
    yield made
    await made.aclose()


def addresses(count: int) -> list[str]:
    """`count` fresh checksummed addresses (watched, or paid and not watched)."""
    return [Account.create().address for _ in range(count)]


def send(
    node: AnvilNode, to: str, value: int = 0, data: bytes = b"", gas: int | None = None
) -> str:
    """A transaction from anvil's first account (unlocked); its hash, once mined unless
    automine is off (anvil answers before its automine has mined the block, so a scan
    right after could miss it). With `gas`, nothing is estimated: a reverting call is
    mined failed."""
    tx: dict[str, Any] = {"from": node.funder, "to": to, "value": hex(value)}
    if data:
        tx["data"] = "0x" + data.hex()
    if gas is not None:
        tx["gas"] = hex(gas)
    tx_hash = str(node.call("eth_sendTransaction", tx))
    if node.call("anvil_getAutomine"):
        node.wait_receipt(tx_hash)
    return tx_hash


def mined(node: AnvilNode, tx_hash: str) -> BlockRef:
    receipt = node.wait_receipt(tx_hash)
    return BlockRef(int(receipt["blockNumber"], 16), str(receipt["blockHash"]))


def one_block(node: AnvilNode, *sends: tuple[Any, ...]) -> tuple[list[str], BlockRef]:
    """Several transactions mined together in one block: their hashes, and the block."""
    node.automine(False)
    try:
        hashes = [send(node, *args) for args in sends]
        node.mine(1)
    finally:
        node.automine(True)
    blocks = {mined(node, h) for h in hashes}
    assert len(blocks) == 1
    return hashes, blocks.pop()


def calldata(signature: str, *to: str) -> bytes:
    return keccak(text=signature)[:4] + abi_encode(["address"] * len(to), list(to))


def token_transfer(to: str, units: int) -> bytes:
    return TRANSFER_SELECTOR + abi_encode(["address", "uint256"], [to, units])


@lru_cache(maxsize=1)
def forwarder_bytecode() -> bytes:
    import vyper  # type: ignore[import-untyped]

    out = vyper.compile_code(FORWARDER.read_text(), output_formats=["bytecode"])
    return bytes.fromhex(out["bytecode"].removeprefix("0x"))


def deploy_forwarder(node: AnvilNode) -> str:
    tx = {"from": node.funder, "data": "0x" + forwarder_bytecode().hex(), "gas": hex(1_000_000)}
    receipt = node.wait_receipt(node.call("eth_sendTransaction", tx))
    return to_checksum_address(receipt["contractAddress"])


def credit(
    tx_hash: str,
    position: str,
    address: str,
    asset: Asset,
    units: int,
    block: BlockRef | None,
    sender: str,
) -> Incoming:
    return Incoming(Chain.ETHEREUM, tx_hash, position, address, asset.id, units, block, sender)


def funder(node: AnvilNode) -> str:
    return to_checksum_address(node.funder)


# -- the native coin ----------------------------------------------------------------------
async def test_a_native_transfer_is_found_at_its_block_and_position(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    assert isinstance(gateway, DepositScanner)
    assert (gateway.confirmations, gateway.scan_span) == (12, 500)  # ETHEREUM's depth
    watched, elsewhere = addresses(2)
    before = await gateway.head()
    paid = send(node, watched, 10**18)
    block = mined(node, paid)
    send(node, elsewhere, 5)  # not watched: not reported
    node.mine(2)
    head = await gateway.head()
    assert head.height == block.height + 3 and await gateway.block(head.height) == head
    assert await gateway.block(block.height) == block
    assert await gateway.block(head.height + 1) is None

    found = await gateway.scan(before.height + 1, head.height, [watched])

    assert found == [credit(paid, "tx", watched, ETH, 10**18, block, funder(node))]
    assert await gateway.scan(block.height + 1, head.height, [watched]) == []
    assert await gateway.locate(paid, block) == block


async def test_a_watched_address_is_reported_as_the_wallet_stores_it(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    (watched,) = addresses(1)
    block = mined(node, paid := send(node, watched.lower(), 7))

    (found,) = await gateway.scan(block.height, block.height, [watched])

    assert found.address == watched and found.tx_hash == paid and found.amount_units == 7


# -- tokens ---------------------------------------------------------------------------------
async def test_token_transfers_to_watched_addresses_are_found_and_others_not(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    watched, other_watched, elsewhere = addresses(3)
    first = (await gateway.head()).height + 1
    node.fund(funder(node), USDT, 1_000)
    minted = node.call("eth_getBlockByNumber", "latest", False)["transactions"][0]
    node.fund(elsewhere, USDT, 9)  # a mint to an address nobody watches
    moved = send(node, node.tokens[USDC.id], data=token_transfer(other_watched, 0))
    paid = send(node, node.tokens[USDT.id], data=token_transfer(watched, 250))
    last = (await gateway.head()).height

    found = await gateway.scan(first, last, [watched, other_watched])

    # a transfer of zero units credits nothing; the mint to the funder is not watched
    assert minted and moved
    assert found == [
        credit(paid, "log:0", watched, USDT, 250, mined(node, paid), funder(node)),
    ]
    node.fund(watched, USDC, 3)  # a mint: from the zero address
    head = await gateway.head()
    (mint,) = await gateway.scan(last + 1, head.height, [watched])
    assert (mint.asset_id, mint.amount_units, mint.sender, mint.position) == (
        USDC.id,
        3,
        ZERO,
        "log:0",
    )


async def test_a_logs_position_is_its_place_in_its_transaction_not_in_its_block(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """Two token transfers in one block: the second's log is the block's second (logIndex
    1) and its transaction's first: `log:0`, the place a reorg that mines the transaction
    into another block leaves unchanged."""
    first_payee, second_payee = addresses(2)
    node.fund(funder(node), USDT, 100)
    (one, two), block = one_block(
        node,
        (node.tokens[USDT.id], 0, token_transfer(first_payee, 10)),
        (node.tokens[USDT.id], 0, token_transfer(second_payee, 20)),
    )
    logs = node.call("eth_getTransactionReceipt", two)["logs"]
    assert [int(entry["logIndex"], 16) for entry in logs] == [1]

    found = await gateway.scan(block.height, block.height, [first_payee, second_payee])

    assert [(c.tx_hash, c.position, c.address, c.amount_units) for c in found] == [
        (one, "log:0", first_payee, 10),
        (two, "log:0", second_payee, 20),
    ]


# -- value moved inside contract calls ---------------------------------------------------
async def test_value_moved_inside_contract_calls_is_found_at_its_place_in_the_call_tree(
    node: AnvilNode, gateway: EvmGateway, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    """Read from `trace_block` (anvil serves it), then from `debug_traceBlockByHash` with
    `callTracer` (a node without `trace_block`, as geth): the same credits at the same
    positions."""
    forwarder, relay = deploy_forwarder(node), deploy_forwarder(node)
    alice, bob, carol = addresses(3)
    watch = [alice, bob, carol]

    forwarded = send(node, forwarder, 1_000, calldata("forward(address)", alice))
    split = send(node, forwarder, 301, calldata("split(address,address)", bob, carol))
    relayed = send(node, relay, 55, calldata("relay(address,address)", forwarder, carol))
    direct = send(node, alice, 9)  # a transaction's own value: `tx`, counted once
    first, last = mined(node, forwarded).height, mined(node, direct).height

    found = await gateway.scan(first, last, watch)

    assert gateway.scanner.traces is True and gateway.scanner.tracers[0] == "trace_block"
    assert found == [
        credit(forwarded, "call:0", alice, ETH, 1_000, mined(node, forwarded), forwarder),
        credit(split, "call:0", bob, ETH, 150, mined(node, split), forwarder),
        credit(split, "call:1", carol, ETH, 151, mined(node, split), forwarder),
        credit(relayed, "call:0.0", carol, ETH, 55, mined(node, relayed), forwarder),
        credit(direct, "tx", alice, ETH, 9, mined(node, direct), funder(node)),
    ]
    assert int(node.call("eth_getBalance", carol, "latest"), 16) == 151 + 55

    proxy.refuse("trace_block", -32601, "the method trace_block does not exist/is not available")
    assert await proxied.scan(first, last, watch) == found
    assert proxied.scanner.tracers == ["debug_traceBlockByHash"]
    assert (
        proxy.calls["trace_block"] == 1
        and proxy.calls["debug_traceBlockByHash"] == last - first + 1
    )


async def test_reverted_calls_and_failed_transactions_move_nothing(
    node: AnvilNode, gateway: EvmGateway, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    forwarder, relay = deploy_forwarder(node), deploy_forwarder(node)
    (alice,) = addresses(1)
    watch = [alice, forwarder]  # the forwarder watched too: its own top-level value

    failed = send(node, forwarder, 40, calldata("forward_and_fail(address)", alice), gas=100_000)
    swallowed = send(
        node, relay, 70, calldata("relay_failing(address,address)", forwarder, alice), 200_000
    )
    kept = send(node, forwarder, 5, calldata("forward(address)", alice))
    assert node.receipt(failed)["status"] == "0x0"  # type: ignore[index]
    assert node.receipt(swallowed)["status"] == "0x1"  # type: ignore[index]
    assert int(node.call("eth_getBalance", relay, "latest"), 16) == 70  # the revert gave it back
    # the inner call did send to alice before it reverted: a CALL with value below a
    # failed one, itself without an error
    frames = {
        tuple(t["traceAddress"]): t
        for t in node.call("trace_block", hex(mined(node, swallowed).height))
    }
    assert frames[(0,)]["error"] == "Reverted" and "error" not in frames[(0, 0)]
    assert frames[(0, 0)]["action"]["to"] == alice.lower()
    assert int(frames[(0, 0)]["action"]["value"], 16) == 70
    first, last = mined(node, failed).height, mined(node, kept).height

    found = await gateway.scan(first, last, watch)

    # the failed transaction: neither its own value nor the call below it; the relay's
    # inner call reverted, so neither the forwarder's value nor alice's
    assert found == [
        credit(kept, "tx", forwarder, ETH, 5, mined(node, kept), funder(node)),
        credit(kept, "call:0", alice, ETH, 5, mined(node, kept), forwarder),
    ]
    proxy.refuse("trace_block", -32601, "Method not found")  # the same from `callTracer`
    assert await proxied.scan(first, last, watch) == found
    assert await gateway.locate(failed, mined(node, failed)) is None  # it moved nothing
    assert await gateway.locate(kept, None) == mined(node, kept)


async def test_without_a_tracer_a_transactions_own_value_is_read_from_its_receipt(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """A node without a tracer (most public providers): each tracer asked once, then
    never; a transaction's own value counts when its receipt says success (receipts of
    the block when it holds several candidates, else of the one); value moved inside a
    call is not seen (the documented limit)."""
    proxy.refuse("trace_block", -32601, "the method trace_block does not exist/is not available")
    proxy.refuse("debug_traceBlockByHash", -32000, "debug_traceBlockByHash is not supported")
    forwarder = deploy_forwarder(node)
    (alice,) = addresses(1)
    (forwarded, failed), together = one_block(
        node,
        (forwarder, 8, calldata("forward(address)", alice)),
        (forwarder, 40, calldata("forward_and_fail(address)", alice), 100_000),
    )
    alone = mined(node, direct := send(node, alice, 3))

    with caplog.at_level(logging.WARNING):
        found = await proxied.scan(together.height, alone.height, [alice, forwarder])
        again = await proxied.scan(together.height, alone.height, [alice, forwarder])

    assert (
        found
        == again
        == [
            credit(forwarded, "tx", forwarder, ETH, 8, together, funder(node)),
            credit(direct, "tx", alice, ETH, 3, alone, funder(node)),
        ]
    )
    assert node.receipt(failed)["status"] == "0x0"  # type: ignore[index]
    assert proxy.calls["trace_block"] == proxy.calls["debug_traceBlockByHash"] == 1
    assert proxied.scanner.traces is False
    assert proxy.calls["eth_getBlockReceipts"] == 2  # the block with two candidates, twice
    assert sum("traces no calls" in r.message for r in caplog.records) == 1

    proxy.refuse("eth_getBlockReceipts", -32601, "Method not found")
    proxy.reset()
    assert await proxied.scan(together.height, alone.height, [alice, forwarder]) == found
    assert proxy.calls["eth_getBlockReceipts"] == 1 and proxied.scanner.block_receipts is False
    assert proxy.calls["eth_getTransactionReceipt"] == 3  # one per candidate


# -- many addresses, refused ranges, failures ------------------------------------------
async def test_1500_watched_addresses_take_two_log_queries_and_both_are_read(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    watch = addresses(1_500)
    ordered = sorted(watch, key=str.lower)  # the queries take them in this order
    low, high = ordered[10], ordered[1_200]  # one in each query of 1,000
    first = (await proxied.head()).height + 1
    node.fund(low, USDT, 11)
    node.fund(high, USDC, 22)
    native = send(node, high, 33)
    last = mined(node, native).height
    proxy.reset()

    found = await proxied.scan(first, last, watch)

    assert {(c.address, c.asset_id, c.amount_units, c.position) for c in found} == {
        (low, USDT.id, 11, "log:0"),
        (high, USDC.id, 22, "log:0"),
        (high, ETH.id, 33, "tx"),
    }
    assert proxy.calls["eth_getLogs"] == 2
    assert proxy.logs_asked == [(first, last), (first, last)]


async def test_a_range_the_node_refuses_is_halved_and_every_block_read(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    watched = addresses(1)[0]
    first = (await proxied.head()).height + 1
    paid = []
    for units in range(1, 8):
        node.fund(watched, USDT, units)
        paid.append(int(node.call("eth_blockNumber"), 16))
        node.mine(units % 3)  # empty blocks between some of them
    last = (await proxied.head()).height
    proxy.limit_logs(3)

    found = await proxied.scan(first, last, [watched])

    assert sorted(c.amount_units for c in found) == list(range(1, 8))
    assert sorted(c.block.height for c in found if c.block) == paid
    asked = sorted(proxy.logs_asked)
    assert all(b - a + 1 <= 3 for a, b in asked)
    covered = [n for a, b in asked for n in range(a, b + 1)]
    assert covered == list(range(first, last + 1))  # each block once, none skipped
    assert proxy.calls["eth_getLogs"] > len(asked)  # the refused ones


async def test_a_block_refused_alone_or_another_refusal_fails_the_scan(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    watched = addresses(1)[0]
    first = (await proxied.head()).height + 1
    node.fund(watched, USDT, 1)
    node.fund(watched, USDT, 2)
    last = (await proxied.head()).height
    proxy.limit_logs(0, -32602, "block range is too wide")  # even one block
    with pytest.raises(NodeUnavailable):
        await proxied.scan(first, last, [watched])

    proxy.reset()
    proxy.refuse("eth_getLogs", -32000, "internal error")  # not about the range
    with pytest.raises(NodeUnavailable):
        await proxied.scan(first, last, [watched])
    assert proxy.calls["eth_getLogs"] == 1  # not halved

    proxy.reset()
    proxy.refuse("eth_getLogs", -32005, "daily request count exceeded, request rate limited")
    with pytest.raises(NodeUnavailable):
        await proxied.scan(first, last, [watched])
    assert proxy.calls["eth_getLogs"] == 1  # a rate limit is not a range


async def test_a_block_the_node_fails_to_give_fails_the_whole_scan(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    watched = addresses(1)[0]
    first = mined(node, send(node, watched, 1)).height
    broken = mined(node, send(node, watched, 2)).height
    last = mined(node, send(node, watched, 3)).height
    assert len(await proxied.scan(first, last, [watched])) == 3
    proxy.refuse(
        "eth_getBlockByNumber", -32000, "header not found", when=lambda p: p[0] == hex(broken)
    )

    with pytest.raises(NodeUnavailable):  # never the two other blocks alone
        await proxied.scan(first, last, [watched])


async def test_an_unreachable_node_raises_node_unavailable(node: AnvilNode) -> None:
    down = gateway_on("http://127.0.0.1:1", node)
    for call in (
        down.head(),
        down.block(1),
        down.scan(1, 2, addresses(1)),
        down.mempool(addresses(1)),
        down.locate("0x" + "ab" * 32, None),
    ):
        with pytest.raises(NodeUnavailable):
            await call


# -- reorgs and the pool ------------------------------------------------------------------
async def test_a_reorg_takes_the_deposit_away_and_the_new_block_is_answered(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    (watched,) = addresses(1)
    node.mine(2)
    snapshot = node.call("anvil_snapshot")
    paid = send(node, watched, 10**15)
    block = mined(node, paid)
    (found,) = await gateway.scan(block.height, block.height, [watched])
    assert found.block == block and await gateway.locate(paid, None) == block

    assert node.call("anvil_revert", snapshot) is True
    # anvil forgets the reverted blocks' transactions: not mined, not pooled
    assert node.transaction(paid) is None and node.pooled() == []
    assert await gateway.locate(paid, block) is None
    assert await gateway.block(block.height) is None  # above the head now
    node.mine(1)

    now = await gateway.block(block.height)
    assert now is not None and now.hash != block.hash and await gateway.head() == now
    assert await gateway.scan(block.height, block.height, [watched]) == []


async def test_a_transaction_mined_again_elsewhere_keeps_its_positions(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """A signed token transfer mined alone, then (after a reorg) behind another transfer in
    a new block: same hash, same position `log:0`, its new block."""
    payer = Account.create()
    watched, other = addresses(2)
    node.fund(payer.address, ETH, 10**18)
    node.fund(payer.address, USDT, 100)
    node.fund(funder(node), USDT, 100)
    raw = payer.sign_transaction(
        {
            "chainId": 1,
            "nonce": 0,
            "to": node.tokens[USDT.id],
            "data": token_transfer(watched, 40),
            "value": 0,
            "gas": 100_000,
            "maxFeePerGas": 100 * 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
    ).raw_transaction
    snapshot = node.call("anvil_snapshot")
    tx_hash = node.send_raw(raw)
    first = mined(node, tx_hash)
    (before,) = await gateway.scan(first.height, first.height, [watched])

    node.call("anvil_revert", snapshot)
    node.automine(False)
    try:
        send(node, node.tokens[USDT.id], 0, token_transfer(other, 1), 100_000)
        assert node.send_raw(raw) == tx_hash
        node.mine(2)
    finally:
        node.automine(True)
    again = mined(node, tx_hash)
    assert again != first
    (after,) = await gateway.scan(again.height, again.height, [watched])

    assert (
        (after.tx_hash, after.position)
        == (before.tx_hash, before.position)
        == (
            tx_hash,
            "log:0",
        )
    )
    assert before.block == first and after.block == again
    assert await gateway.locate(tx_hash, first) == again


async def test_the_pool_is_read_and_a_pooled_transaction_located(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    watched, elsewhere = addresses(2)
    node.fund(funder(node), USDT, 10)
    node.automine(False)
    try:
        paid = send(node, watched, 12_345)
        send(node, elsewhere, 1)
        token = send(node, node.tokens[USDT.id], 0, token_transfer(watched, 5), 100_000)
        assert await gateway.locate(paid, None) is MEMPOOL

        pooled = await gateway.mempool([watched])

        # the token transfer's position is known once mined: not read from the pool
        assert pooled == [credit(paid, "tx", watched, ETH, 12_345, None, funder(node))]
        node.mine(1)
    finally:
        node.automine(True)
    block = mined(node, paid)
    assert await gateway.locate(paid, None) == block
    scanned = await gateway.scan(block.height, block.height, [watched])
    assert [(c.key, c.block) for c in scanned] == [
        (pooled[0].key, block),  # the same credit, mined
        (("ETHEREUM", token, "log:0"), block),
    ]
    assert await gateway.mempool([watched]) == []
    assert await gateway.locate("0x" + "cd" * 32, None) is None


async def test_a_node_without_a_readable_pool_answers_none_and_is_not_asked_again(
    node: AnvilNode, proxy: RpcProxy, proxied: EvmGateway
) -> None:
    proxy.refuse("txpool_content", -32601, "the method txpool_content does not exist")
    watched = addresses(1)
    assert await proxied.mempool(watched) == [] and await proxied.mempool(watched) == []
    assert proxy.calls["txpool_content"] == 1


# -- a chain the family builds, and the devnet ---------------------------------------------
async def test_a_chain_the_family_builds_scans_its_own_assets(tmp_path: Path) -> None:
    walletcore_l2chain = pytest.importorskip(
        "walletcore_l2chain", reason="pip install -e tests/plugins/walletcore_l2chain"
    )
    from walletcore.chainplugins import GatewayContext
    from walletcore.clock import ManualClock
    from walletcore.domain.catalog import Catalog
    from walletcore.nonces import LocalNonceLeases
    from walletcore.settings import Settings
    from walletcore_chains.evm.addresses import verify_signature

    chain, own = walletcore_l2chain.BASECHAIN, walletcore_l2chain.CHAIN
    eth, usdc = walletcore_l2chain.ETH, walletcore_l2chain.USDC
    plugin = walletcore_l2chain.PLUGIN
    leases = LocalNonceLeases()
    with AnvilNode(
        chain, chain_id=walletcore_l2chain.CHAIN_ID, block_time=None, assets=own.assets
    ) as l2:
        context: GatewayContext[Any] = GatewayContext(
            chain=chain,
            settings=plugin.settings_model(
                basechain_rpc_url=l2.url,
                basechain_tokens={usdc.id: l2.tokens[usdc.id]},
                basechain_scan_span=50,
            ),
            core=Settings(home=tmp_path),
            clock=ManualClock(),
            catalog=Catalog({chain: own.assets}),
            validate_address=validate_address,
            verify_signature=verify_signature,
            keys=plugin.keys[chain],
            nonce_leases=lambda: leases,
            description=own.description,
        )
        gateway = plugin.gateways["rpc"].build(context)
        try:
            assert isinstance(gateway, DepositScanner)
            assert (gateway.confirmations, gateway.scan_span) == (10, 50)
            (watched,) = addresses(1)
            first = (await gateway.head()).height + 1
            l2.fund(watched, usdc, 6)
            paid = str(
                l2.call("eth_sendTransaction", {"from": l2.funder, "to": watched, "value": "0x9"})
            )
            l2.wait_receipt(paid)
            last = (await gateway.head()).height
            found = await gateway.scan(first, last, [watched])
            assert {(c.chain, c.asset_id, c.amount_units, c.position) for c in found} == {
                (chain, usdc.id, 6, "log:0"),
                (chain, eth.id, 9, "tx"),
            }
            assert paid in {c.tx_hash for c in found}
        finally:
            await gateway.aclose()


async def test_the_in_process_devnet_scans_tokens_and_transactions_own_value() -> None:
    devnet = DevnetEvmGateway(Chain.ETHEREUM, validate_address)
    assert isinstance(devnet, DepositScanner) and devnet.confirmations == 1
    watched, elsewhere = addresses(2)
    first = (await devnet.head()).height + 1
    await devnet.fund(watched, ETH, 10**9)
    await devnet.fund(watched, USDT, 77)
    await devnet.fund(elsewhere, USDC, 1)
    head = await devnet.head()

    found = await devnet.scan(first, head.height, [watched])

    assert [(c.asset_id, c.amount_units, c.position, c.block) for c in found] == [
        (ETH.id, 10**9, "tx", await devnet.block(first)),
        (USDT.id, 77, "log:0", await devnet.block(first + 1)),
    ]
    assert devnet.scanner.traces is False  # eth-tester traces nothing
    assert await devnet.locate(found[0].tx_hash, None) == found[0].block
    assert await devnet.mempool([watched]) == []


# -- the core's deposit watch on this gateway ---------------------------------------------
async def test_the_deposit_watch_sees_confirms_and_reverses_evm_deposits(
    node: AnvilNode, gateway: EvmGateway, tmp_path: Path
) -> None:
    """The core's deposit watch (walletcore.services.deposits, in-memory storage) on this
    gateway: a user's native, token and in-call deposits `seen` at their block and
    `confirmed` 12 blocks deep (ETHEREUM's depth); one a reorg took away `reversed`."""
    from dependency_injector import providers

    from walletcore import Settings, create_container
    from walletcore.domain.assets import CONTRACT_CHAINS
    from walletcore.domain.clients import User
    from walletcore.domain.deposits import DepositStatus
    from walletcore.domain.ids import new_id
    from walletcore.domain.wallet import WalletOwner, WalletRecord
    from walletcore.testing.chains import FollowedFakeGateway
    from walletcore.testing.storage import InMemoryStorage

    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    gateways[Chain.ETHEREUM] = gateway
    storage = InMemoryStorage()
    container = create_container(Settings(home=tmp_path, repo="memory"), storage=storage)
    container.gateways.override(providers.Object(gateways))
    client = (await container.auth().create_client("Acme Pay")).client
    user, (wallet,) = new_id(), addresses(1)
    now = datetime.now(UTC)
    async with storage.write() as unit:
        await unit.wallets.add_user(
            User(user_id=user, client_id=client.client_id, created_at=now),
            WalletRecord(
                client_id=client.client_id,
                owner=WalletOwner.USER,
                user_id=user,
                sealed=b"",
                addresses={Chain.ETHEREUM: wallet},
                created_at=now,
            ),
        )

    async def stored() -> dict[tuple[str, str], tuple[int, DepositStatus, BlockRef | None]]:
        async with storage.read() as unit:
            page = await unit.deposits.page(client.client_id, None, limit=10)
        return {(d.tx_hash, d.position): (d.amount_units, d.status, d.block) for d in page}

    watch = container.deposit_watch()
    forwarder = deploy_forwarder(node)
    assert (await watch.scan(Chain.ETHEREUM)).error is None  # places the cursor
    native = send(node, wallet, 10**16)
    node.fund(wallet, USDT, 25)
    token = node.call("eth_getBlockByNumber", "latest", False)["transactions"][0]
    forwarded = send(node, forwarder, 700, calldata("forward(address)", wallet))
    report = await watch.scan(Chain.ETHEREUM)
    assert (report.error, report.found, report.confirmed) == (None, 3, 0)
    seen = {
        (native, "tx"): (10**16, DepositStatus.SEEN, mined(node, native)),
        (token, "log:0"): (25, DepositStatus.SEEN, mined(node, token)),
        (forwarded, "call:0"): (700, DepositStatus.SEEN, mined(node, forwarded)),
    }
    assert await stored() == seen

    node.mine(12 - 3)  # the native deposit's block is 12 deep (its own included)
    report = await watch.scan(Chain.ETHEREUM)
    assert (report.error, report.confirmed) == (None, 1)
    node.mine(2)
    assert (await watch.scan(Chain.ETHEREUM)).confirmed == 2
    assert {s for _, s, _ in (await stored()).values()} == {DepositStatus.CONFIRMED}

    snapshot = node.call("anvil_snapshot")
    lost = send(node, wallet, 5)
    assert (await watch.scan(Chain.ETHEREUM)).found == 1
    node.call("anvil_revert", snapshot)
    node.mine(2)  # a longer branch without it
    report = await watch.scan(Chain.ETHEREUM)
    assert (report.error, report.rewound, report.reversed) == (None, True, 1)
    assert (await stored())[(lost, "tx")] == (5, DepositStatus.REVERSED, None)
