"""The Solana deposit scan (`DepositScanner`, walletcore_chains/solana/scanning.py) on
LiteSVM in process and through the JSON-RPC engine over HTTP to the loopback node (the
`chain` fixture runs each test on both): SOL and SPL credits found at their slot with
their exact amounts (a transfer that creates the recipient's token account included),
nothing for an unwatched address, a failed transaction or the payer's own debit; 2,000
watched addresses in one scan; a range equals its slots scanned one by one; skipped
slots; commitment; `locate`; a node that fails or changes its fork during a scan; the
core's deposit watch on the gateway."""

from __future__ import annotations

import base64
import json
import secrets
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from sol_support import RpcSolanaGateway, build, new_wallet, send
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.system_program import CreateAccountParams, create_account
from solders.transaction import Transaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    get_associated_token_address,
    initialize_account,
    mint_to,
)
from spl.token.models import InitializeAccountParams, MintToParams

from walletcore import Settings, create_container
from walletcore.domain.assets import CONTRACT_CHAINS, Asset, Chain
from walletcore.domain.clients import User
from walletcore.domain.deposits import BlockRef, DepositStatus, Incoming
from walletcore.domain.errors import NodeUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import MEMPOOL, DepositScanner, SignedTransfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.chains import FollowedFakeGateway
from walletcore.testing.http import RpcError
from walletcore.testing.storage import InMemoryStorage
from walletcore_chains.addresses import validate_address
from walletcore_chains.solana.blocks import block_from_json
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.solana.node import Commitment, LiteSvmNode
from walletcore_chains.solana.scanning import SCAN_SPAN, credits
from walletcore_chains.testing.solana_rpc_node import RpcTestNode

Gateway = DevnetSolanaGateway | RpcSolanaGateway
SOL, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(6),
    CONTRACT_CATALOG.asset_by_id(61),
    CONTRACT_CATALOG.asset_by_id(62),
)
SOLANA = Chain.SOLANA


def runtime(chain: Gateway) -> LiteSvmNode:
    """The LiteSVM node under either engine."""
    return chain.devnet.node if isinstance(chain, RpcSolanaGateway) else chain.node


@pytest.fixture(autouse=True)
def instant_finality(devnet: DevnetSolanaGateway) -> Iterator[None]:
    yield
    devnet.node.finality_slots = 0


def slot_of(chain: Gateway, signature: str) -> int:
    executed = runtime(chain).executed_now(signature)
    assert executed is not None
    return executed.slot


def index_of(chain: Gateway, signature: str, account: str | Pubkey) -> int:
    executed = runtime(chain).executed_now(signature)
    assert executed is not None
    return [str(k) for k in executed.tx.message.account_keys].index(str(account))


def ata(owner: str, asset: Asset, chain: SolanaGateway) -> Pubkey:
    """`owner`'s associated token account of `asset`."""
    return get_associated_token_address(Pubkey.from_string(owner), chain.mint(asset))


def faucet_of(chain: Gateway) -> DevnetSolanaGateway:
    return chain.devnet if isinstance(chain, RpcSolanaGateway) else chain


def tx_of(signed: SignedTransfer) -> Transaction:
    return Transaction.from_bytes(base64.b64decode(json.loads(signed.raw)["tx"]))


def nobody() -> str:
    return str(Pubkey(secrets.token_bytes(32)))


def skip_slots(chain: Gateway, count: int) -> None:
    """The clock passes `count` slots where no block is made (skipped)."""
    node = runtime(chain)
    node.svm.warp_to_slot(node.height_now() + count)


def on(chain: Gateway, commitment: Commitment) -> SolanaGateway:
    """The same chain through a gateway of another commitment."""
    if isinstance(chain, RpcSolanaGateway):
        return RpcSolanaGateway(chain.devnet, chain.url, commitment=commitment)
    return SolanaGateway(chain.node, validate_address, chain._mints, commitment=commitment)


async def test_the_gateway_is_a_deposit_scanner_at_its_commitment(chain: Gateway) -> None:
    assert isinstance(chain, DepositScanner)
    assert (chain.confirmations, chain.scan_span) == (1, SCAN_SPAN)
    assert await chain.mempool({nobody()}) == []  # no mempool to read on Solana


async def test_a_sol_transfer_to_a_watched_address_is_found_at_its_slot(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    signature = await send(chain, SOL, alice, bob.address, 123_456_789)
    slot = slot_of(chain, signature)
    head = await chain.head()
    assert head.height >= slot and head == await chain.block(head.height)
    block = await chain.block(slot)
    assert block is not None and block.height == slot

    found = await chain.scan(slot, slot, {bob.address, nobody()})

    assert found == [
        Incoming(
            SOLANA,
            signature,
            f"sol:{index_of(chain, signature, bob.address)}",
            bob.address,
            SOL.id,
            123_456_789,
            block,
            alice.address,
        )
    ]
    assert await chain.balance(bob.address, SOL) == 123_456_789


async def test_an_spl_transfer_is_credited_to_the_owner_wallet(chain: Gateway) -> None:
    alice, bob, platform = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, USDC, 50_000_000)
    await chain.fund(alice.address, USDT, 9_000_000)
    await chain.fund(platform.address, SOL, 10**9)
    # bob has no USDC account: the platform pays the fee and creates it in the transfer
    first = await send(chain, USDC, alice, bob.address, 12_345_678, sponsor=platform)
    second = await send(chain, USDC, alice, bob.address, 1, sponsor=platform)
    third = await send(chain, USDT, alice, bob.address, 7_000_000, sponsor=platform)
    slots = [slot_of(chain, s) for s in (first, second, third)]
    watched = {bob.address, alice.address, platform.address}

    found = await chain.scan(slots[0], slots[-1], watched)

    bob_usdc = ata(bob.address, USDC, chain)
    bob_usdt = ata(bob.address, USDT, chain)
    expected = [
        (first, f"spl:{index_of(chain, first, bob_usdc)}", USDC.id, 12_345_678),
        (second, f"spl:{index_of(chain, second, bob_usdc)}", USDC.id, 1),
        (third, f"spl:{index_of(chain, third, bob_usdt)}", USDT.id, 7_000_000),
    ]
    assert [(c.tx_hash, c.position, c.asset_id, c.amount_units) for c in found] == expected
    assert {(c.address, c.sender) for c in found} == {(bob.address, alice.address)}
    for credit, slot in zip(found, slots, strict=True):
        assert credit.block == await chain.block(slot)
    # the platform paid the fee and the rent (its lamports fell), alice sent: no credit
    assert await chain.balance(bob.address, USDC) == 12_345_679


async def test_tokens_minted_to_a_watched_owner_are_credited_from_the_minter(
    chain: Gateway,
) -> None:
    bob = new_wallet()
    devnet = faucet_of(chain)
    await devnet.fund(bob.address, USDT, 5_000)  # the faucet mints to bob's token account
    [signature] = runtime(chain).signatures_now(ata(bob.address, USDT, chain), 1)
    slot = slot_of(chain, signature)
    [credit] = await chain.scan(slot, slot, {bob.address})
    assert (credit.asset_id, credit.amount_units, credit.address) == (USDT.id, 5_000, bob.address)
    assert credit.sender == str(devnet._faucet.pubkey())  # the fee payer: no owner sent it


async def test_a_token_account_other_than_the_owners_associated_one_is_not_credited(
    chain: Gateway,
) -> None:
    bob = new_wallet()
    devnet = faucet_of(chain)
    node, faucet = devnet.node, devnet._faucet.pubkey()
    mint = chain.mint(USDC)
    other = Keypair()
    create = CreateAccountParams(
        from_pubkey=faucet,
        to_pubkey=other.pubkey(),
        lamports=int(node.svm.minimum_balance_for_rent_exemption(165)),
        space=165,
        owner=TOKEN_PROGRAM_ID,
    )
    init = InitializeAccountParams(
        program_id=TOKEN_PROGRAM_ID,
        account=other.pubkey(),
        mint=mint,
        owner=Pubkey.from_string(bob.address),
    )
    minted = MintToParams(
        program_id=TOKEN_PROGRAM_ID,
        mint=mint,
        dest=other.pubkey(),
        mint_authority=faucet,
        amount=777,
    )
    signature = devnet._run(
        node, [create_account(create), initialize_account(init), mint_to(minted)], other
    )
    slot = slot_of(chain, signature)
    # the node reports it (bob owns it), but bob's wallet reads and sends its associated
    # account only: a credit here would be one its balance never shows
    block = await chain.node.block(slot, "finalized")
    assert block is not None
    [balance] = block.transactions[0].post_token_balances
    assert (balance.owner, balance.amount) == (bob.address, 777)
    assert await chain.scan(slot, slot, {bob.address}) == []


async def test_an_unwatched_recipient_is_not_reported(chain: Gateway) -> None:
    alice, bob, carol = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    await chain.fund(alice.address, USDC, 10**6)
    sol = await send(chain, SOL, alice, bob.address, 10**6)
    usdc = await send(chain, USDC, alice, bob.address, 10**5)
    first, last = slot_of(chain, sol), slot_of(chain, usdc)
    assert await chain.scan(first, last, {carol.address, nobody()}) == []
    assert len(await chain.scan(first, last, {bob.address})) == 2


async def test_a_failed_transaction_moves_nothing(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**7)
    await chain.fund(bob.address, SOL, 10**7)
    signed = await build(chain, SOL, alice, bob.address, 10**9)  # more than alice holds
    # past a preflight, as when the state changes before its block: it lands, and fails
    runtime(chain).execute(tx_of(signed), preflight=False)
    slot = slot_of(chain, signed.tx_hash)
    block = await chain.node.block(slot, "finalized")
    assert block is not None
    [failed] = block.transactions
    assert failed.signature == signed.tx_hash and failed.err is not None
    assert failed.post_balances[0] < failed.pre_balances[0]  # its fee was charged
    assert await chain.scan(slot, slot, {alice.address, bob.address}) == []


async def test_the_senders_own_debit_and_the_fee_payer_are_not_credited(chain: Gateway) -> None:
    alice, bob, platform = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    await chain.fund(platform.address, SOL, 10**9)
    own = await send(chain, SOL, alice, bob.address, 10**6)
    sponsored = await send(chain, SOL, alice, bob.address, 2 * 10**6, sponsor=platform)
    first, last = slot_of(chain, own), slot_of(chain, sponsored)

    found = await chain.scan(first, last, {alice.address, bob.address, platform.address})

    assert [(c.tx_hash, c.address, c.amount_units, c.sender) for c in found] == [
        (own, bob.address, 10**6, alice.address),
        (sponsored, bob.address, 2 * 10**6, alice.address),  # the sender, not the payer
    ]


async def test_two_thousand_watched_addresses_in_one_scan(
    chain: Gateway, request: pytest.FixtureRequest
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, SOL, 10**10)
    await chain.fund(alice.address, USDC, 10**9)
    watched = [nobody() for _ in range(2_000)]
    paid = {watched[7]: 1_000_001, watched[999]: 1_000_002, watched[1_999]: 1_000_003}
    signatures = [await send(chain, SOL, alice, to, units) for to, units in paid.items()]
    signatures.append(await send(chain, USDC, alice, watched[500], 42))
    skip_slots(chain, 3)
    signatures.append(await send(chain, USDC, alice, nobody(), 43))  # not watched
    first, last = slot_of(chain, signatures[0]), slot_of(chain, signatures[-1])
    rpc: RpcTestNode | None = None
    if isinstance(chain, RpcSolanaGateway):
        rpc = request.getfixturevalue("rpc_node")
        rpc.calls.clear()

    found = await chain.scan(first, last, watched)

    assert {(c.address, c.asset_id, c.amount_units) for c in found} == {
        *((to, SOL.id, units) for to, units in paid.items()),
        (watched[500], USDC.id, 42),
    }
    if rpc is not None:  # one getBlock per block, never a call per address
        calls = list(rpc.calls)
        assert calls.count("getBlock") == 5  # the 5 blocks; the 3 skipped slots: none
        assert sorted(set(calls)) == ["getBlock", "getBlocks", "getSlot"]
        assert len(calls) == 7


async def test_a_range_scan_equals_the_union_of_its_slots(chain: Gateway) -> None:
    alice, bob, carol = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**10)
    await chain.fund(alice.address, USDT, 10**9)
    signatures = [await send(chain, SOL, alice, bob.address, 10**6)]
    skip_slots(chain, 4)
    signatures.append(await send(chain, USDT, alice, carol.address, 5_000_000))
    signatures.append(await send(chain, SOL, alice, carol.address, 10**6 + 1))
    skip_slots(chain, 2)
    signatures.append(await send(chain, USDT, alice, bob.address, 6))
    first, last = slot_of(chain, signatures[0]) - 1, slot_of(chain, signatures[-1])
    watched = {bob.address, carol.address}

    whole = await chain.scan(first, last, watched)
    one_by_one = [c for s in range(first, last + 1) for c in await chain.scan(s, s, watched)]

    assert whole == one_by_one
    assert [c.tx_hash for c in whole] == signatures
    assert len({c.key for c in whole}) == 4


async def test_a_skipped_slot_reads_as_the_block_before_it(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    before = slot_of(chain, await send(chain, SOL, alice, bob.address, 10**6))
    skip_slots(chain, 5)
    after = slot_of(chain, await send(chain, SOL, alice, bob.address, 10**6))
    assert after > before + 5
    landed = await chain.block(before)
    assert landed is not None
    for skipped in range(before + 1, after):
        assert await chain.block(skipped) == BlockRef(skipped, landed.hash)
        assert await chain.scan(skipped, skipped, {bob.address}) == []
    head = await chain.head()
    assert await chain.block(head.height + 1) is None  # above the head
    assert await chain.block(-1) is None
    # the next block names the one before it as its parent: the skipped slots between
    block = await chain.node.block(after, "finalized", transactions=False)
    assert block is not None
    assert (block.parent_slot, block.previous_blockhash) == (before, landed.hash)


async def test_a_cursor_on_a_skipped_slot_stays_valid_as_the_chain_grows(chain: Gateway) -> None:
    """The core's check, as its watch runs it: the hash stored for the last slot scanned
    is the one `block` answers for that slot later, until the fork changes."""
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    await send(chain, SOL, alice, bob.address, 10**6)
    skip_slots(chain, 3)
    head = await chain.head()
    cursor = await chain.block(head.height + 2)
    assert cursor is None  # not produced yet
    await send(chain, SOL, alice, bob.address, 10**6)
    stored = await chain.block(head.height + 2)  # skipped, behind the new head
    assert stored is not None
    await send(chain, SOL, alice, bob.address, 10**6)
    assert await chain.block(stored.height) == stored


async def test_the_head_is_the_newest_block_at_the_commitment(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    runtime(chain).finality_slots = 3
    signature = await send(chain, SOL, alice, bob.address, 10**6)
    slot = slot_of(chain, signature)
    finalized, confirmed = on(chain, "finalized"), on(chain, "confirmed")
    try:
        assert (await confirmed.head()).height == slot
        assert (await finalized.head()).height < slot
        assert await finalized.block(slot) is None  # not finalized yet: above its head
        assert await finalized.locate(signature, None) is MEMPOOL  # landed, not at depth
        [credit] = await confirmed.scan(slot, slot, {bob.address})
        assert await confirmed.locate(signature, None) == credit.block
        skip_slots(chain, 3)
        await send(chain, SOL, alice, new_wallet().address, 10**6)  # a block past it
        assert (await finalized.head()).height >= slot
        assert await finalized.scan(slot, slot, {bob.address}) == [credit]
        assert await finalized.locate(signature, None) == credit.block
    finally:
        await finalized.aclose()
        await confirmed.aclose()


async def test_locate_a_known_and_an_unknown_signature(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    signature = await send(chain, SOL, alice, bob.address, 10**6)
    slot = slot_of(chain, signature)
    block = await chain.block(slot)
    assert block is not None
    assert await chain.locate(signature, None) == block
    assert await chain.locate(signature, block) == block
    unknown = str(Keypair().sign_message(b"never sent"))
    assert await chain.locate(unknown, None) is None
    assert await chain.locate(unknown, block) is None  # not in the block it names
    assert await chain.locate("not a signature", None) is None


# -- the JSON-RPC engine: the node's shapes and failures ------------------------------------
class _Forgetful(RpcTestNode):
    """A node without transaction history: every signature status is unknown."""

    def _getSignatureStatuses(self, signatures: list[str], *_: Any) -> Any:
        response = super()._getSignatureStatuses(signatures)
        return type(response)([None] * len(signatures), self._context())


class _Failing(RpcTestNode):
    """A node that cannot answer getBlock for the slots in `fail`."""

    def __init__(self, node: LiteSvmNode) -> None:
        super().__init__(node)
        self.fail: set[int] = set()

    def _getBlock(self, slot: int, config: Any = None, *_: Any) -> dict[str, Any]:
        if slot in self.fail:
            raise RpcError(-32004, f"Block not available for slot {slot}")
        return super()._getBlock(slot, config)


class _Forking(RpcTestNode):
    """A node whose first getBlocks answer leaves a block out (a fork it left)."""

    def __init__(self, node: LiteSvmNode) -> None:
        super().__init__(node)
        self.forks = 0

    def _getBlocks(self, start: int, end: Any = None, config: Any = None, *_: Any) -> list[int]:
        slots = super()._getBlocks(start, end, config)
        if self.forks > 0 and len(slots) > 2:
            self.forks -= 1
            return slots[:1] + slots[2:]
        return slots


async def test_a_node_without_history_still_locates_a_deposit_in_its_block(
    devnet: DevnetSolanaGateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    signature = await send(devnet, SOL, alice, bob.address, 10**6)
    block = await devnet.block(slot_of_devnet(devnet, signature))
    assert block is not None
    with _Forgetful(devnet.node) as node:
        chain = RpcSolanaGateway(devnet, node.url)
        assert await chain.locate(signature, block) == block  # the block holds it
        assert await chain.locate(signature, None) is None  # nowhere it can tell
        other = await send(devnet, SOL, alice, bob.address, 10**6)
        assert await chain.locate(other, block) is None  # not in that block
        await chain.aclose()


def slot_of_devnet(devnet: DevnetSolanaGateway, signature: str) -> int:
    executed = devnet.node.executed_now(signature)
    assert executed is not None
    return executed.slot


async def test_a_block_the_node_cannot_answer_fails_the_whole_scan(
    devnet: DevnetSolanaGateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    slots = [
        slot_of_devnet(devnet, await send(devnet, SOL, alice, bob.address, 10**6)) for _ in range(3)
    ]
    with _Failing(devnet.node) as node:
        chain = RpcSolanaGateway(devnet, node.url)
        node.fail = {slots[1]}
        with pytest.raises(NodeUnavailable) as caught:
            await chain.scan(slots[0], slots[-1], {bob.address})
        assert caught.value.status == 503
        node.fail = set()
        assert len(await chain.scan(slots[0], slots[-1], {bob.address})) == 3
        await chain.aclose()
    down = RpcSolanaGateway(devnet, "http://127.0.0.1:1", timeout=2.0)
    for call in (
        down.head(),
        down.block(slots[0]),
        down.scan(slots[0], slots[-1], {bob.address}),
        down.locate("1" * 64, None),
    ):
        with pytest.raises(NodeUnavailable):
            await call
    await down.aclose()


async def test_a_fork_change_during_a_scan_reads_the_range_again(
    devnet: DevnetSolanaGateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    slots = [
        slot_of_devnet(devnet, await send(devnet, SOL, alice, bob.address, 10**6 + n))
        for n in range(3)
    ]
    with _Forking(devnet.node) as node:
        chain = RpcSolanaGateway(devnet, node.url)
        node.forks = 1  # once: the range is read again, whole
        found = await chain.scan(slots[0], slots[-1], {bob.address})
        assert [c.amount_units for c in found] == [10**6, 10**6 + 1, 10**6 + 2]
        node.forks = 5  # every time: never a partial answer
        with pytest.raises(NodeUnavailable):
            await chain.scan(slots[0], slots[-1], {bob.address})
        await chain.aclose()


async def test_get_block_answers_the_shapes_of_a_solana_node(
    devnet: DevnetSolanaGateway, rpc_node: RpcTestNode
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    await devnet.fund(alice.address, USDC, 10**6)
    signature = await send(devnet, USDC, alice, bob.address, 10**5)
    slot = slot_of_devnet(devnet, signature)

    def call(method: str, *params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        posted = urllib.request.Request(
            rpc_node.url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(posted, timeout=5) as answer:
            return json.loads(answer.read())

    config = {"encoding": "json", "transactionDetails": "full", "rewards": False}
    block = call("getBlock", slot, {**config, "maxSupportedTransactionVersion": 0})["result"]
    assert "rewards" not in block and block["blockHeight"] == slot
    [entry] = block["transactions"]
    assert entry["version"] == "legacy"
    assert entry["transaction"]["signatures"][0] == signature
    meta = entry["meta"]
    keys = entry["transaction"]["message"]["accountKeys"]
    assert len(meta["preBalances"]) == len(meta["postBalances"]) == len(keys)
    bob_account = keys.index(str(ata(bob.address, USDC, devnet)))
    [created] = [b for b in meta["postTokenBalances"] if b["accountIndex"] == bob_account]
    assert created["owner"] == bob.address and created["uiTokenAmount"]["amount"] == "100000"
    assert created["uiTokenAmount"]["uiAmountString"] == "0.1"
    assert bob_account not in [b["accountIndex"] for b in meta["preTokenBalances"]]
    tx = call("getTransaction", signature, {"encoding": "base64"})["result"]
    assert tx["meta"]["postTokenBalances"] == meta["postTokenBalances"]
    top = call("getSlot", {"commitment": "finalized"})["result"]
    assert call("getBlock", top + 1)["error"]["code"] == -32004
    skip_slots_on(devnet, 2)
    await send(devnet, SOL, alice, bob.address, 10**6)
    assert call("getBlock", top + 1)["error"]["code"] == -32007  # skipped
    assert call("getBlocks", top, top + 3)["result"] == [top, top + 3]
    assert call("getBlocks", 0, 600_000)["error"]["code"] == -32602
    assert call("getBlock", top, {"commitment": "processed"})["error"]["code"] == -32602
    bare = call("getBlock", slot, {"transactionDetails": "none", "rewards": False})["result"]
    assert bare == {k: v for k, v in block.items() if k != "transactions"}
    signatures = call("getBlock", slot, {"transactionDetails": "signatures"})["result"]
    assert (signatures["signatures"], signatures["rewards"]) == ([signature], [])
    # "accounts", what the scan reads: every key with its roles, the balances, no more
    accounts = call("getBlock", slot, {"transactionDetails": "accounts", "rewards": False})
    [listed] = accounts["result"]["transactions"]
    assert [k["pubkey"] for k in listed["transaction"]["accountKeys"]] == keys
    payer = listed["transaction"]["accountKeys"][0]
    assert payer == {"pubkey": keys[0], "writable": True, "signer": True, "source": "transaction"}
    program = listed["transaction"]["accountKeys"][keys.index(str(TOKEN_PROGRAM_ID))]
    assert (program["writable"], program["signer"]) == (False, False)
    assert listed["meta"]["postTokenBalances"] == meta["postTokenBalances"]
    assert "logMessages" not in listed["meta"] and "version" not in listed


def skip_slots_on(devnet: DevnetSolanaGateway, count: int) -> None:
    devnet.node.svm.warp_to_slot(devnet.node.height_now() + count)


# -- getBlock's JSON, as a node answers it for versioned transactions -----------------------
def test_a_versioned_transaction_credits_an_account_it_loaded_from_a_table() -> None:
    watched, payer, static, loaded = nobody(), nobody(), nobody(), nobody()
    result = {
        "blockhash": "5" * 44,
        "parentSlot": 9,
        "previousBlockhash": "4" * 44,
        "blockTime": None,
        "transactions": [
            {
                "transaction": {"signatures": ["sig"], "message": {"accountKeys": [payer, static]}},
                "meta": {
                    "err": None,
                    "fee": 5_000,
                    # the static keys, then the loaded writable, then the loaded read-only
                    "preBalances": [10**9, 1, 0, 7],
                    "postBalances": [10**9 - 5_000 - 300, 1, 300, 7],
                    "loadedAddresses": {"writable": [watched], "readonly": [loaded]},
                },
                "version": 0,
            }
        ],
    }
    block = block_from_json(10, result)
    assert block.transactions[0].account_keys == (payer, static, watched, loaded)
    [credit] = credits(SOLANA, block, {watched, loaded}, {})
    assert (credit.position, credit.address, credit.amount_units, credit.sender) == (
        "sol:2",
        watched,
        300,
        payer,
    )
    assert credit.block == BlockRef(10, "5" * 44)


@pytest.mark.parametrize(
    "broken",
    [
        None,
        {"blockhash": "x", "parentSlot": 1},
        {"blockhash": "x", "parentSlot": 1, "previousBlockhash": "y", "transactions": [{}]},
        {
            "blockhash": "x",
            "parentSlot": 1,
            "previousBlockhash": "y",
            "transactions": [
                {
                    "transaction": {"signatures": ["s"], "message": {"accountKeys": ["a", "b"]}},
                    "meta": {"err": None, "preBalances": [1], "postBalances": [1, 2]},
                }
            ],
        },
        {
            "blockhash": "x",
            "parentSlot": 1,
            "previousBlockhash": "y",
            "transactions": [
                {
                    "transaction": {"signatures": ["s"], "message": {"accountKeys": ["a"]}},
                    "meta": {"err": None, "preBalances": ["1"], "postBalances": [True]},
                }
            ],
        },
    ],
)
def test_a_block_that_does_not_read_is_refused_whole(broken: Any) -> None:
    with pytest.raises(ValueError, match="unreadable block"):
        block_from_json(2, broken)


async def test_the_deposit_watch_finds_and_confirms_them_at_the_commitment(
    chain: Gateway, tmp_path: Path
) -> None:
    """The core's deposit watch (walletcore.services.deposits) on this gateway: a user's SOL
    and USDC deposits are found once their block is finalized, and confirmed at once (the
    commitment is the depth); the payer's own debit is no deposit."""
    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    gateways[SOLANA] = chain
    storage = InMemoryStorage()
    container = create_container(Settings(home=tmp_path, repo="memory"), storage=storage)
    container.gateways.override(providers.Object(gateways))
    client = (await container.auth().create_client("Acme Pay")).client
    user, wallet, payer = new_id(), new_wallet(), new_wallet()
    now = datetime.now(UTC)
    async with storage.write() as unit:
        await unit.wallets.add_user(
            User(user_id=user, client_id=client.client_id, created_at=now),
            WalletRecord(
                client_id=client.client_id,
                owner=WalletOwner.USER,
                user_id=user,
                sealed=b"",
                addresses={SOLANA: wallet.address},
                created_at=now,
            ),
        )
    watch = container.deposit_watch()
    assert (await watch.scan(SOLANA)).error is None  # places the cursor
    await chain.fund(payer.address, SOL, 10**10)
    await chain.fund(payer.address, USDC, 10**8)
    runtime(chain).finality_slots = 2
    sol = await send(chain, SOL, payer, wallet.address, 250_000_000)
    usdc = await send(chain, USDC, payer, wallet.address, 12_500_000)  # creates its account
    report = await watch.scan(SOLANA)
    # the SOL block is finalized: found and confirmed; the USDC one is not yet
    assert (report.error, report.found, report.confirmed) == (None, 1, 1)
    assert report.events == ["deposit.seen", "deposit.confirmed"]

    skip_slots(chain, 2)
    await send(chain, SOL, payer, wallet.address, 1)  # a block: the USDC one is finalized
    report = await watch.scan(SOLANA)
    assert (report.error, report.found, report.confirmed) == (None, 1, 1)
    async with storage.read() as unit:
        page = await unit.deposits.page(client.client_id, None, limit=10)
    assert sorted(
        (d.tx_hash, d.position, d.asset_id, d.amount_units, d.sender) for d in page
    ) == sorted(
        [
            (
                sol,
                f"sol:{index_of(chain, sol, wallet.address)}",
                SOL.id,
                250_000_000,
                payer.address,
            ),
            (
                usdc,
                f"spl:{index_of(chain, usdc, ata(wallet.address, USDC, chain))}",
                USDC.id,
                12_500_000,
                payer.address,
            ),
        ]
    )
    assert {(d.status, d.user_id) for d in page} == {(DepositStatus.CONFIRMED, user)}
    for deposit in page:
        assert deposit.block == await chain.block(slot_of(chain, deposit.tx_hash))
