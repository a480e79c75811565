"""`TronGateway` as a `DepositScanner` against the loopback TRON node over HTTP: TRX, USDT
and TRX moved inside a contract call found at their block with exact amounts, only for the
watched addresses and only when the transaction succeeded; 2,000 watched addresses in one
scan with one request per range and one per block with a contract call; a range equal to
its blocks scanned one by one (a node refusing large ranges included); `locate` of mined,
pending, failed and unknown transactions; node failures and answers that disagree raising,
never a partial answer; tronweb's own reading of the blocks and the Transfer logs."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from eth_abi.abi import encode as abi_encode
from eth_utils.crypto import keccak
from tron_support import (
    TRX,
    USDT,
    Wallet,
    make_gateway,
    signed_transfer,
    tronweb_check,
    tronweb_transfers,
)

from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import NodeUnavailable
from walletcore.ports import MEMPOOL, DepositScanner
from walletcore_chains.testing.tron_node import PAY, PAY_TOKEN, TRY_PAY, TronTestNode, b58
from walletcore_chains.tron import proto, rows, validate_address
from walletcore_chains.tron.client import TronClient
from walletcore_chains.tron.gateway import TronGateway
from walletcore_chains.tron.gateway.base import evm_address, raw21

SUN = 1_000_000
BLOCKS = "/wallet/getblockbylimitnext"
RECEIPTS = "/wallet/gettransactioninfobyblocknum"


@asynccontextmanager
async def chain(**node_options: Any) -> AsyncIterator[tuple[TronTestNode, TronGateway]]:
    with TronTestNode(**node_options) as node:
        gateway = make_gateway(node)
        try:
            yield node, gateway
        finally:
            await gateway.aclose()


def funded(node: TronTestNode, sun: int = 100 * SUN) -> Wallet:
    wallet = Wallet()
    node.fund(wallet.address, sun)
    return wallet


def stranger() -> str:
    """An address nobody holds the key of (no account on the node)."""
    return b58(b"\x41" + secrets.token_bytes(20))


def ref(node: TronTestNode, height: int) -> BlockRef:
    return BlockRef(height, node.blocks[height][1].hex())


def height(node: TronTestNode) -> int:
    return node.blocks[-1][0]


async def send(gw: TronGateway, sender: Wallet, to: str, asset: Any, units: int) -> str:
    signed, _ = await signed_transfer(gw, sender, to, asset, units)
    return await gw.broadcast(signed)


async def call(
    gw: TronGateway,
    caller: Wallet,
    contract: str,
    signature: str,
    types: list[str],
    args: list[Any],
    *,
    value: int = 0,
) -> str:
    """A TriggerSmartContract of `caller` (its call value `value` sun), signed and sent."""
    head = await gw.client.head()
    block = bytes.fromhex(head.id)
    data = keccak(text=signature)[:4] + abi_encode(types, args)
    contract_call = proto.Contract(
        proto.TRIGGER, raw21(caller.address), raw21(contract), value, data
    )
    raw = proto.Raw(
        contract_call,
        block[6:8],
        block[8:16],
        head.timestamp + 60_000,
        int(time.time() * 1000),
        100 * SUN,
    ).encode()
    tx_id = proto.txid(raw)
    signed = proto.signed_bytes(raw, [caller.sign(bytes.fromhex(tx_id))])
    answer = await gw.client.broadcast_hex(signed)
    assert answer["result"] is True, answer
    return tx_id


def calls_to(node: TronTestNode, path: str) -> int:
    return node.paths.count(path)


async def test_the_gateway_is_a_scanner_on_the_lifecycle_depth(gateway: TronGateway) -> None:
    assert isinstance(gateway, DepositScanner)
    assert gateway.confirmations == 19  # java-tron solidifies a block 19 deep on mainnet
    assert gateway.scan_span == 100  # getblockbylimitnext's limit
    assert await gateway.mempool([stranger()]) == []


async def test_head_and_blocks_are_the_nodes(node: TronTestNode, gateway: TronGateway) -> None:
    sender, recipient = funded(node), funded(node, 1)
    await send(gateway, sender, recipient.address, TRX, SUN)
    node.advance(3)
    assert await gateway.head() == ref(node, height(node))
    assert await gateway.block(0) == ref(node, 0)  # genesis: protobuf leaves number 0 out
    assert await gateway.block(1) == ref(node, 1)
    assert await gateway.block(height(node) + 1) is None
    assert await gateway.block(-1) is None


async def test_trx_to_a_watched_address_is_found_at_its_block(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient, other = funded(node), Wallet(), Wallet()
    start = height(node)
    tx_id = await send(gateway, sender, recipient.address, TRX, 5 * SUN + 7)  # activates it
    await send(gateway, sender, other.address, TRX, 3 * SUN)  # to nobody watched
    back = await send(gateway, recipient, sender.address, TRX, SUN)  # the watched one pays
    found = await gateway.scan(start + 1, height(node), [recipient.address, stranger()])
    block = node.landed[tx_id].block
    assert found == [
        Incoming(
            chain=gateway.chain,
            tx_hash=tx_id,
            position="trx",
            address=recipient.address,
            asset_id=TRX.id,
            amount_units=5 * SUN + 7,
            block=ref(node, block),
            sender=sender.address,
        )
    ]
    assert node.balance(recipient.address) == 5 * SUN + 7 - SUN - node.info(back).get("fee", 0)
    assert await gateway.block(block) == found[0].block


async def test_usdt_to_a_watched_address_and_not_the_senders_debit(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, USDT.id, 100 * SUN)
    start = height(node)
    tx_id = await send(gateway, sender, recipient.address, USDT, 12_345_678)
    await send(gateway, sender, stranger(), USDT, 2 * SUN)  # an unwatched recipient
    watched = [sender.address, recipient.address]
    found = await gateway.scan(start + 1, height(node), watched)
    assert found == [
        Incoming(
            gateway.chain,
            tx_id,
            "trc20:0",
            recipient.address,
            USDT.id,
            12_345_678,
            ref(node, node.landed[tx_id].block),
            sender.address,
        )
    ]
    assert node.token_balance(recipient.address, USDT.id) == 12_345_678


async def test_a_failed_trc20_call_moves_nothing_and_is_nowhere(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, USDT.id, SUN)
    start = height(node)
    tx_id = await send(gateway, sender, recipient.address, USDT, 5 * SUN)  # holds 1: reverts
    info = node.info(tx_id)
    assert info["result"] == "FAILED" and info["receipt"]["result"] == "REVERT"
    assert await gateway.scan(start + 1, height(node), [recipient.address]) == []
    assert node.token_balance(recipient.address, USDT.id) == 0
    assert await gateway.locate(tx_id, None) is None  # in a block, but it moved nothing


async def test_trx_moved_inside_a_contract_call(node: TronTestNode, gateway: TronGateway) -> None:
    payer = node.deploy_payer()
    caller, first, second = funded(node, 500 * SUN), Wallet(), Wallet()
    unwatched = stranger()
    start = height(node)
    recipients = [first.address, unwatched, second.address]
    amounts = [7 * SUN, SUN, 11]
    tx_id = await call(
        gateway,
        caller,
        payer,
        PAY,
        ["address[]", "uint256[]"],
        [[evm_address(a) for a in recipients], amounts],
        value=sum(amounts),
    )
    # more than the call's value: the third send fails, the call reverts, nothing moves
    failed = await call(
        gateway,
        caller,
        payer,
        PAY,
        ["address[]", "uint256[]"],
        [[evm_address(first.address), evm_address(second.address)], [2 * SUN, 2 * SUN]],
        value=3 * SUN,
    )
    assert node.info(failed)["receipt"]["result"] == "REVERT"
    assert all(it["rejected"] for it in node.info(failed)["internal_transactions"])
    # the same failing payment inside a call that goes on: it succeeds, its inner sends
    # are rejected (the payer keeps the TRX), and nothing reached the recipients
    tried = await call(
        gateway,
        caller,
        payer,
        TRY_PAY,
        ["address[]", "uint256[]"],
        [[evm_address(first.address), evm_address(second.address)], [2 * SUN, 2 * SUN]],
        value=3 * SUN,
    )
    info = node.info(tried)
    assert info["receipt"]["result"] == "SUCCESS"
    inner = info["internal_transactions"]
    assert [(rows.base58(it["transferTo_address"]), it.get("rejected")) for it in inner] == [
        (payer, True),
        (first.address, True),
    ]
    assert node.balance(payer) == 3 * SUN
    found = await gateway.scan(start + 1, height(node), [first.address, second.address])
    block = ref(node, node.landed[tx_id].block)
    assert found == [
        Incoming(gateway.chain, tx_id, "internal:0", first.address, TRX.id, 7 * SUN, block, payer),
        Incoming(gateway.chain, tx_id, "internal:2", second.address, TRX.id, 11, block, payer),
    ]
    assert (node.balance(first.address), node.balance(second.address)) == (7 * SUN, 11)
    assert node.balance(unwatched) == SUN


async def test_token_logs_of_another_contracts_call_by_their_index(
    node: TronTestNode, gateway: TronGateway
) -> None:
    payer = node.deploy_payer()
    owner, first, second = funded(node, 500 * SUN), Wallet(), Wallet()
    node.fund_token(owner.address, USDT.id, 50 * SUN)
    usdt = node.tokens[USDT.id]
    start = height(node)
    await call(
        gateway,
        owner,
        usdt,
        "approve(address,uint256)",
        ["address", "uint256"],
        [evm_address(payer), 50 * SUN],
    )
    tx_id = await call(
        gateway,
        owner,
        payer,
        PAY_TOKEN,
        ["address", "address[]", "uint256[]"],
        [
            evm_address(usdt),
            [evm_address(first.address), evm_address(second.address)],
            [3 * SUN, 4],
        ],
    )
    # the payer's own `Paid` log comes first: the Transfer logs are 1 and 2
    assert len(node.info(tx_id)["log"]) == 3
    found = await gateway.scan(
        start + 1, height(node), [owner.address, first.address, second.address]
    )
    block = ref(node, node.landed[tx_id].block)
    assert found == [
        Incoming(
            gateway.chain, tx_id, "trc20:1", first.address, USDT.id, 3 * SUN, block, owner.address
        ),
        Incoming(gateway.chain, tx_id, "trc20:2", second.address, USDT.id, 4, block, owner.address),
    ]


async def test_two_thousand_watched_addresses_in_one_scan() -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender = funded(node, 1_000 * SUN)
        node.fund_token(sender.address, USDT.id, 100 * SUN)
        watched = [stranger() for _ in range(2_000)]
        start = height(node)
        picked = [watched[0], watched[777], watched[1_999]]
        ids = [await send(gateway, sender, a, TRX, (n + 1) * SUN) for n, a in enumerate(picked)]
        ids.append(await send(gateway, sender, watched[1_000], USDT, 9 * SUN))
        await send(gateway, sender, stranger(), TRX, SUN)
        assert len(node.pack(together=True)) == 5  # one block with all five
        node.advance(3)
        node.advance(3)  # two empty blocks
        node.paths.clear()
        found = await gateway.scan(start + 1, height(node), watched)
        assert [(c.tx_hash, c.address, c.asset_id, c.amount_units) for c in found] == [
            (ids[0], picked[0], TRX.id, SUN),
            (ids[1], picked[1], TRX.id, 2 * SUN),
            (ids[2], picked[2], TRX.id, 3 * SUN),
            (ids[3], watched[1_000], USDT.id, 9 * SUN),
        ]
        assert {c.block for c in found} == {ref(node, start + 1)}
        # one request for the range, one for the receipts of the block with a contract call
        assert node.paths == [BLOCKS, RECEIPTS]


async def test_a_range_is_the_union_of_its_blocks_and_a_refused_range_is_halved() -> None:
    async with chain(auto_pack=False) as (node, gateway):
        payer = node.deploy_payer()
        sender, watched = funded(node, 1_000 * SUN), [Wallet().address for _ in range(4)]
        node.fund_token(sender.address, USDT.id, 100 * SUN)
        start = height(node)
        for round_ in range(3):
            await send(gateway, sender, watched[round_], TRX, SUN + round_)
            await send(gateway, sender, watched[round_ + 1], USDT, 2 * SUN + round_)
            await call(
                gateway,
                sender,
                payer,
                PAY,
                ["address[]", "uint256[]"],
                [[evm_address(watched[3])], [5 + round_]],
                value=5 + round_,
            )
            node.pack(together=True)
            node.advance(3)
        last = height(node)
        whole = await gateway.scan(start + 1, last, watched)
        singles = [c for h in range(start + 1, last + 1) for c in await gateway.scan(h, h, watched)]
        assert whole == singles and len(whole) == 9
        assert [c.position for c in whole[:3]] == ["trx", "trc20:0", "internal:0"]
        # a node taking at most 2 blocks a request: asked for 5, then halved to 2
        node.block_limit = 2
        halving = make_gateway(node, blocks_per_call=5)
        try:
            node.paths.clear()
            assert await halving.scan(start + 1, last, watched) == whole
            assert calls_to(node, BLOCKS) == 1 + -(-(last - start) // 2)
        finally:
            await halving.aclose()


async def test_locate_mined_pending_and_unknown() -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        tx_id = await send(gateway, sender, recipient.address, TRX, SUN)
        assert await gateway.locate(tx_id, None) is MEMPOOL  # in the node's pending pool
        assert node.pack() == [tx_id]
        mined = ref(node, node.landed[tx_id].block)
        assert await gateway.locate(tx_id, None) == mined
        assert await gateway.locate("0x" + tx_id.upper(), mined) == mined
        gone = await send(gateway, sender, recipient.address, TRX, 2 * SUN)
        node.drop_pending(gone)
        assert await gateway.locate(gone, None) is None  # evicted: nowhere
        assert await gateway.locate(secrets.token_hex(32), mined) is None
        assert await gateway.locate("not a hash", None) is None


async def test_node_failures_raise_never_a_partial_answer(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, USDT.id, 10 * SUN)
    start = height(node)
    tx_id = await send(gateway, sender, recipient.address, USDT, SUN)
    last = height(node)
    watched = [recipient.address]
    assert len(await gateway.scan(start + 1, last, watched)) == 1
    for path in (BLOCKS, RECEIPTS):
        node.broken = {path}
        with pytest.raises(NodeUnavailable):
            await gateway.scan(start + 1, last, watched)
    node.broken = {"/wallet/gettransactioninfobyid"}
    with pytest.raises(NodeUnavailable):
        await gateway.locate(tx_id, None)
    node.broken = {"/wallet/getblockbynum"}
    with pytest.raises(NodeUnavailable):
        await gateway.block(1)
    node.broken = set()
    with pytest.raises(NodeUnavailable):  # above the head: never an empty answer
        await gateway.scan(last, last + 5, watched)
    unreachable = TronGateway(
        TronClient("http://127.0.0.1:1", timeout=2), validate_address, tokens=node.tokens
    )
    try:
        with pytest.raises(NodeUnavailable, match="unreachable"):
            await unreachable.scan(start + 1, last, watched)
        with pytest.raises(NodeUnavailable, match="unreachable"):
            await unreachable.head()
    finally:
        await unreachable.aclose()


async def test_answers_that_disagree_raise(
    node: TronTestNode, gateway: TronGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, USDT.id, 10 * SUN)
    start = height(node)
    await send(gateway, sender, recipient.address, USDT, SUN)
    await send(gateway, sender, recipient.address, USDT, 2 * SUN)
    last = height(node)
    real = node._wallet_gettransactioninfobyblocknum
    # the receipts of another block (the chain moved between the two reads)
    monkeypatch.setattr(
        node,
        "_wallet_gettransactioninfobyblocknum",
        lambda body: real({"num": int(body["num"]) - 1}),
    )
    with pytest.raises(NodeUnavailable):
        await gateway.scan(last, last, [recipient.address])
    # a node keeping no receipts: a contract call without one is not read as "nothing"
    monkeypatch.setattr(node, "_wallet_gettransactioninfobyblocknum", lambda body: [])
    with pytest.raises(NodeUnavailable):
        await gateway.scan(start + 1, last, [recipient.address])
    monkeypatch.setattr(node, "_wallet_gettransactioninfobyblocknum", real)
    # a block that does not follow its parent
    blocks = node._wallet_getblockbylimitnext

    def unlinked(body: dict[str, Any]) -> dict[str, Any]:
        answer = blocks(body)
        answer["block"][-1]["block_header"]["raw_data"]["parentHash"] = "00" * 32
        return answer

    monkeypatch.setattr(node, "_wallet_getblockbylimitnext", unlinked)
    with pytest.raises(NodeUnavailable):
        await gateway.scan(start + 1, last, [recipient.address])


async def test_tronweb_reads_the_blocks_and_transfers_as_the_scanner_does(
    tronweb: Path,
) -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node, 1_000 * SUN), Wallet()
        node.fund_token(sender.address, USDT.id, 100 * SUN)
        start = height(node)
        await send(gateway, sender, recipient.address, TRX, 4 * SUN)
        await send(gateway, sender, recipient.address, USDT, 6 * SUN + 1)
        await send(gateway, sender, stranger(), USDT, 3)
        node.pack(together=True)
        number = start + 1
        block = node.answer(BLOCKS, {"startNum": number, "endNum": number + 1})["block"][0]
        checked = tronweb_check(tronweb, block["transactions"])
        assert [c["txID"] for c in checked] == [t["txID"] for t in block["transactions"]]
        assert [c["rawDataHex"] for c in checked] == [
            t["raw_data_hex"] for t in block["transactions"]
        ]
        assert {c["signer"] for c in checked} == {sender.address}
        infos = node.answer(RECEIPTS, {"num": number})
        transfers = tronweb_transfers(tronweb, infos, rows.TRANSFER_TOPIC)
        assert len(transfers) == 2
        found = await gateway.scan(number, number, [recipient.address])
        tokens = [c for c in found if c.asset_id == USDT.id]
        assert [
            (c.tx_hash, c.position, node.tokens[USDT.id], c.sender, c.address, str(c.amount_units))
            for c in tokens
        ] == [
            (t["txID"], f"trc20:{t['index']}", t["token"], t["from"], t["to"], t["value"])
            for t in transfers
            if t["to"] == recipient.address
        ]
        assert [c.position for c in found] == ["trx", "trc20:0"]


async def test_the_deposit_watch_sees_then_confirms_them_19_blocks_deep(tmp_path: Path) -> None:
    """The core's deposit watch (walletcore.services.deposits) on this gateway: a user's TRX
    and USDT deposits `seen` at their block, `confirmed` once 19 blocks deep."""
    from dependency_injector import providers

    from walletcore import Settings, create_container
    from walletcore.domain.assets import CONTRACT_CHAINS, Chain
    from walletcore.domain.clients import User
    from walletcore.domain.deposits import DepositStatus
    from walletcore.domain.ids import new_id
    from walletcore.domain.wallet import WalletOwner, WalletRecord
    from walletcore.testing.chains import FollowedFakeGateway
    from walletcore.testing.storage import InMemoryStorage

    async with chain() as (node, gateway):
        gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
        gateways[Chain.TRON] = gateway
        storage = InMemoryStorage()
        container = create_container(Settings(home=tmp_path, repo="memory"), storage=storage)
        container.gateways.override(providers.Object(gateways))
        client = (await container.auth().create_client("Acme Pay")).client
        user, wallet = new_id(), Wallet()
        now = datetime.now(UTC)
        async with storage.write() as unit:
            await unit.wallets.add_user(
                User(user_id=user, client_id=client.client_id, created_at=now),
                WalletRecord(
                    client_id=client.client_id,
                    owner=WalletOwner.USER,
                    user_id=user,
                    sealed=b"",
                    addresses={Chain.TRON: wallet.address},
                    created_at=now,
                ),
            )
        watch = container.deposit_watch()
        assert (await watch.scan(Chain.TRON)).error is None  # places the cursor
        sender = funded(node)
        node.fund_token(sender.address, USDT.id, 10 * SUN)
        trx = await send(gateway, sender, wallet.address, TRX, 3 * SUN)
        usdt = await send(gateway, sender, wallet.address, USDT, 4 * SUN)
        report = await watch.scan(Chain.TRON)
        assert (report.error, report.found, report.confirmed) == (None, 2, 0)

        async def stored() -> list[tuple[str, str, int, DepositStatus, BlockRef | None]]:
            async with storage.read() as unit:
                page = await unit.deposits.page(client.client_id, None, limit=10)
            return sorted((d.tx_hash, d.position, d.amount_units, d.status, d.block) for d in page)

        blocks = {t: ref(node, node.landed[t].block) for t in (trx, usdt)}
        assert await stored() == sorted(
            [
                (trx, "trx", 3 * SUN, DepositStatus.SEEN, blocks[trx]),
                (usdt, "trc20:0", 4 * SUN, DepositStatus.SEEN, blocks[usdt]),
            ]
        )
        for _ in range(17):  # the USDT block is 18 deep: not yet
            node.advance(3)
        report = await watch.scan(Chain.TRON)
        assert (report.error, report.confirmed) == (None, 1)  # the TRX block is 19 deep
        node.advance(3)
        assert (await watch.scan(Chain.TRON)).confirmed == 1
        assert {d[3] for d in await stored()} == {DepositStatus.CONFIRMED}
