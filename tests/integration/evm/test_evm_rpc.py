"""The EVM gateway as the `evm` plugin's `rpc` mode builds it (`rpc_web3` + the network's
`EvmConfig`), over HTTP to anvil (Foundry's EVM node: `walletcore_chains.testing.anvil`)
under the network's chain id (Sepolia, BSC testnet), mining a block for each transaction
as it arrives, its tokens given as `WALLETCORE_EVM_TOKENS` would give them: native and
token sends mined and decoded, the fee (EIP-1559 from fee history; a legacy chain), the
node's refusals in its own words, a transaction the node knows already, and the PLATFORM
top-up.

What anvil cannot do stays on the loopback test node (`walletcore_chains.testing.
evm_rpc_node`, a devnet chain behind geth's wire format), each test saying why: a node
without `eth_feeHistory`, BSC's and Polygon's 97-byte `extraData` (anvil's blocks carry
32 bytes), and refusals in the words of geth, bsc and bor (anvil has its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from eth_account import Account
from evm_support import ELSEWHERE, NOWHERE, Wallet, build, chain_gateways, new_wallet, send, sign
from web3 import AsyncHTTPProvider, AsyncWeb3
from web3.exceptions import ExtraDataLengthError

from walletcore.domain.assets import Chain
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    DomainError,
    InsufficientFunds,
    InsufficientGas,
    NodeUnavailable,
    TransferRejected,
)
from walletcore.ports import CheckFailed, FeeQuote, SignedTransfer, Transfer
from walletcore.secretfiles import ConfigurationError
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm import codec
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.fees import NATIVE_GAS
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import EvmSettings, rpc_web3
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_chains.testing.evm_rpc_node import EvmRpcNode

ETH, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(2),
    CONTRACT_CATALOG.asset_by_id(21),
    CONTRACT_CATALOG.asset_by_id(22),
)
BNB, BSC_USDT = CONTRACT_CATALOG.asset_by_id(3), CONTRACT_CATALOG.asset_by_id(31)
SEPOLIA, BSC_TESTNET = 11155111, 97
GWEI = 10**9
needs_anvil = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)


@pytest.fixture(scope="module")
def sepolia() -> Iterator[AnvilNode]:
    """anvil at Sepolia's chain id, a block per transaction (like geth's dev mode)."""
    if find_anvil() is None:
        pytest.skip("no anvil: run `python3 dev.py test` (it installs it)")
    with AnvilNode(Chain.ETHEREUM, chain_id=SEPOLIA, block_time=None) as node:
        yield node


@pytest.fixture(scope="module")
def bsc_testnet() -> Iterator[AnvilNode]:
    if find_anvil() is None:
        pytest.skip("no anvil: run `python3 dev.py test` (it installs it)")
    with AnvilNode(Chain.BSC, chain_id=BSC_TESTNET, block_time=None) as node:
        yield node


@pytest.fixture(scope="module")
def bsc() -> DevnetEvmGateway:
    return DevnetEvmGateway(Chain.BSC, validate_address)


@pytest.fixture
def serve() -> Iterator[Callable[..., EvmRpcNode]]:
    """Start a loopback test node on a devnet chain (stopped after the test)."""
    with ExitStack() as stack:

        def start(devnet: DevnetEvmGateway, **options: Any) -> EvmRpcNode:
            return stack.enter_context(EvmRpcNode(devnet, **options))

        yield start


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., EvmGateway]]:
    """The gateway as the `evm` plugin's `rpc` builds it for the node's chain on `testnet`,
    with the node's token contracts as `WALLETCORE_EVM_TOKENS` (closed after the test)."""
    made: list[EvmGateway] = []

    def gateway(node: AnvilNode | EvmRpcNode, *, web3_chain: Chain | None = None) -> EvmGateway:
        chain = node.chain if isinstance(node, AnvilNode) else node.devnet.chain
        w3 = rpc_web3(node.url, 5.0, web3_chain or chain)
        made.append(EvmGateway(evm_config(chain, "testnet", node.tokens), w3, validate_address))
        return made[-1]

    yield gateway
    for gateway in made:
        await gateway.aclose()


def funded(node: AnvilNode, units: int = 10**18) -> Wallet:
    wallet = new_wallet()
    node.fund(wallet.address, ETH, units)
    return wallet


def nothing_sent(node: AnvilNode, wallet: Wallet) -> bool:
    """Nothing from `wallet` was mined or is waiting in the pool."""
    return node.nonce(wallet.address, "pending") == 0 and node.pooled() == []


# -- sends, mined and decoded ---------------------------------------------------------
@needs_anvil
async def test_a_native_send_over_http_is_mined_and_lookup_and_history_agree(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    assert gateway.config.chain_id == SEPOLIA and gateway.config.confirmations == 3
    alice, bob = funded(node), new_wallet()
    assert await gateway.balance(alice.address, ETH) == 10**18

    tx_hash = await send(gateway, ETH, alice, bob.address, 10**17)

    assert node.wait_receipt(tx_hash)["from"] == alice.address.lower()  # mined at once
    pending = await gateway.lookup(alice.address, ETH, tx_hash)
    assert (pending.status, pending.date) == ("pending", None)  # 1 of 3 confirmations
    node.mine(2)
    sent = await gateway.lookup(alice.address, ETH, tx_hash)
    assert (sent.type, sent.amount_units, sent.status) == ("send", 10**17, "success")
    assert sent.date is not None
    assert (await gateway.history(alice.address, ETH, 10))[0] == sent
    received = await gateway.lookup(bob.address, ETH, tx_hash)
    assert (received.type, received.amount_units) == ("receive", 10**17)
    assert await gateway.history(bob.address, ETH, 10) == [received]
    receipt = node.receipt(tx_hash)
    assert receipt is not None
    assert sent.fee_units == int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert await gateway.balance(alice.address, ETH) == 10**18 - 10**17 - sent.fee_units


@needs_anvil
async def test_a_usdt_send_over_http_is_decoded_from_its_transfer_log(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    assert gateway.token_address(USDT) == node.tokens[USDT.id]  # Sepolia: an override
    alice, bob = funded(node, 10**17), new_wallet()
    node.fund(alice.address, USDT, 5_000_000)

    tx_hash = await send(gateway, USDT, alice, bob.address, 1_250_000)

    receipt = node.wait_receipt(tx_hash)
    node.mine(2)
    [log] = receipt["logs"]
    assert log["address"].lower() == node.tokens[USDT.id].lower()
    assert int(log["data"], 16) == 1_250_000
    sent = await gateway.lookup(alice.address, USDT, tx_hash)
    received = await gateway.lookup(bob.address, USDT, tx_hash)
    assert (sent.type, sent.amount_units, sent.status) == ("send", 1_250_000, "success")
    assert (received.type, received.amount_units) == ("receive", 1_250_000)
    assert await gateway.history(bob.address, USDT, 10) == [received]
    assert (await gateway.history(alice.address, USDT, 10))[0] == sent
    assert await gateway.balance(bob.address, USDT) == 1_250_000
    assert sent.fee_units == 10**17 - await gateway.balance(alice.address, ETH)


# -- fees -----------------------------------------------------------------------------
@needs_anvil
async def test_the_eip1559_fee_is_twice_the_next_base_fee_plus_the_median_tip(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    alice = funded(node)
    for tip in (3 * GWEI, GWEI, 7 * GWEI):  # blocks paying different tips, one each
        paid = node.call(
            "eth_sendTransaction",
            {
                "from": node.funder,
                "to": ELSEWHERE,
                "value": hex(1),
                "gas": hex(NATIVE_GAS),
                "maxFeePerGas": hex(50 * GWEI),
                "maxPriorityFeePerGas": hex(tip),
            },
        )
        node.wait_receipt(paid)
    node.mine(1)  # an empty block: its zero reward says nothing of the tips paid

    history = node.call("eth_feeHistory", "0x5", "latest", [50])
    assert len(history["baseFeePerGas"]) == 6 and 0 in history["gasUsedRatio"]
    tips = [
        int(reward[0], 16)
        for reward, used in zip(history["reward"], history["gasUsedRatio"], strict=True)
        if used > 0
    ]
    assert {3 * GWEI, 7 * GWEI} <= set(tips)
    max_fee = 2 * int(history["baseFeePerGas"][-1], 16) + int(median(tips))

    quote = await gateway.fee(alice.address, ELSEWHERE, ETH, 10**15)
    assert quote.native_units == NATIVE_GAS * max_fee
    unsigned = await gateway.prepare(
        Transfer(ETH, alice.address, ELSEWHERE, 10**15, alice.address), quote
    )
    [tx] = codec.decode_body(unsigned.body)
    assert (tx.fields["type"], tx.fields["maxFeePerGas"]) == (2, max_fee)
    assert tx.fields["maxPriorityFeePerGas"] == int(median(tips))
    tx_hash = await gateway.broadcast(sign(gateway, unsigned, alice))
    landed = node.transaction(tx_hash) or {}
    assert (landed["type"], int(landed["maxFeePerGas"], 16)) == ("0x2", max_fee)
    assert landed["chainId"] == hex(SEPOLIA)


@needs_anvil
async def test_a_legacy_chain_prices_with_the_gas_price_and_sends_type_0(
    connect: Callable[..., EvmGateway],
) -> None:
    """A chain before London (anvil `--hardfork berlin`): its blocks carry no base fee and
    its node answers a fee history of zero base fees, which the gateway reads as legacy."""
    with AnvilNode(Chain.ETHEREUM, chain_id=SEPOLIA, block_time=None, hardfork="berlin") as node:
        gateway = connect(node)
        assert gateway.config.eip1559  # Sepolia's configuration: told by the node's blocks
        assert "baseFeePerGas" not in node.call("eth_getBlockByNumber", "latest", False)
        alice, bob = funded(node), new_wallet()
        price = int(node.call("eth_gasPrice"), 16)

        quote = await gateway.fee(alice.address, bob.address, ETH, 10**16)
        assert quote.native_units == NATIVE_GAS * price
        unsigned = await gateway.prepare(
            Transfer(ETH, alice.address, bob.address, 10**16, alice.address), quote
        )
        [tx] = codec.decode_body(unsigned.body)
        assert tx.fields["gasPrice"] == price and "maxFeePerGas" not in tx.fields
        tx_hash = await gateway.broadcast(sign(gateway, unsigned, alice))

        landed = node.transaction(tx_hash) or {}
        assert (landed["type"], int(landed["gasPrice"], 16)) == ("0x0", price)
        assert int(landed["v"], 16) in (2 * SEPOLIA + 35, 2 * SEPOLIA + 36)  # EIP-155
        receipt = node.wait_receipt(tx_hash)
        node.mine(2)
        row = await gateway.lookup(alice.address, ETH, tx_hash)
        assert (row.type, row.amount_units, row.status) == ("send", 10**16, "success")
        assert row.fee_units == int(receipt["gasUsed"], 16) * price == quote.native_units
        assert await gateway.balance(alice.address, ETH) == 10**18 - 10**16 - row.fee_units
        assert await gateway.history(bob.address, ETH, 10) == [
            await gateway.lookup(bob.address, ETH, tx_hash)
        ]


# -- the node's refusals --------------------------------------------------------------
@needs_anvil
async def test_insufficient_funds_from_the_node_is_a_clear_400_and_nothing_is_sent(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    alice, bob = funded(node, 10**15), new_wallet()
    signed = await build(gateway, ETH, alice, bob.address, 10**18)  # more than it holds
    with pytest.raises(InsufficientFunds) as caught:
        await gateway.broadcast(signed)
    assert caught.value.status == 400 and "nothing was sent" in caught.value.message
    assert nothing_sent(node, alice) and await gateway.balance(bob.address, ETH) == 0
    tx_hash = await send(gateway, ETH, alice, bob.address, 10**14)
    assert (node.transaction(tx_hash) or {})["nonce"] == "0x0"  # the refused nonce is reused


@needs_anvil
async def test_a_token_send_without_gas_money_is_a_clear_400(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    alice, bob = new_wallet(), new_wallet()
    node.fund(alice.address, USDT, 1_000_000)  # tokens, no ETH for the gas
    with pytest.raises(InsufficientGas) as caught:
        await send(gateway, USDT, alice, bob.address, 1_000)
    assert caught.value.status == 400
    assert "ETH cannot pay the transfer's gas" in caught.value.message
    assert nothing_sent(node, alice) and await gateway.balance(bob.address, USDT) == 0


@needs_anvil
@pytest.mark.parametrize(
    ("gas", "error", "words"),
    [
        (20_000, InsufficientGas, "Insufficient gas"),  # "intrinsic gas too low"
        # "intrinsic gas too high -- tx.gas_limit > env.block.gas_limit"
        (60_000_000, TransferRejected, "exceeds the block gas limit"),
    ],
)
async def test_a_gas_limit_the_node_refuses_is_answered_clearly(
    sepolia: AnvilNode,
    connect: Callable[..., EvmGateway],
    gas: int,
    error: type[DomainError],
    words: str,
) -> None:
    node = sepolia
    gateway = connect(node)
    alice = funded(node)
    quote = await gateway.fee(alice.address, ELSEWHERE, ETH, 10**15)
    unsigned = await gateway.prepare(
        Transfer(ETH, alice.address, ELSEWHERE, 10**15, alice.address), quote
    )
    await gateway.release(unsigned)
    [tx] = codec.decode_body(unsigned.body)
    tx.fields["gas"] = gas
    raw = codec.SignedTx(alice.address, tx.nonce, tx.signed(alice.key.sign(tx.digest())), 10**15)
    with pytest.raises(error) as caught:
        await gateway.broadcast(SignedTransfer(codec.encode_envelope([raw]), raw.tx_hash))
    assert words in caught.value.message and "nothing was sent" in caught.value.message
    assert caught.value.status == (400 if error is InsufficientGas else 502)
    assert nothing_sent(node, alice)


@needs_anvil
async def test_a_nonce_used_by_another_transaction_is_refused_and_a_resend_is_not_sent_twice(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    alice, bob = funded(node), new_wallet()
    first = await build(gateway, ETH, alice, bob.address, 10**15)
    assert await gateway.broadcast(first) == first.tx_hash  # nonce 0
    node.wait_receipt(first.tx_hash)  # mined
    # the same bytes again: "nonce too low", but the node knows the hash: sent, once
    assert await gateway.broadcast(first) == first.tx_hash
    assert node.nonce(alice.address) == 1

    quote = await gateway.fee(alice.address, bob.address, ETH, 7)
    unsigned = await gateway.prepare(
        Transfer(ETH, alice.address, bob.address, 7, alice.address), quote
    )
    await gateway.release(unsigned)
    [tx] = codec.decode_body(unsigned.body)
    tx.fields["nonce"] = 0  # another transaction with the nonce the first one used
    twin = codec.SignedTx(alice.address, 0, tx.signed(alice.key.sign(tx.digest())), 7)
    with pytest.raises(TransferRejected) as caught:
        await gateway.broadcast(SignedTransfer(codec.encode_envelope([twin]), twin.tx_hash))
    assert caught.value.status == 502
    assert "nonce was used by another transaction" in caught.value.message
    assert node.transaction(twin.tx_hash) is None and node.nonce(alice.address) == 1
    assert await gateway.balance(bob.address, ETH) == 10**15


@needs_anvil
async def test_a_transaction_the_node_holds_already_counts_as_sent(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    """anvil answers `transaction already imported` for one in its pool."""
    node = sepolia
    gateway = connect(node)
    alice, bob = funded(node), new_wallet()
    signed = await build(gateway, ETH, alice, bob.address, 10**15)
    [tx] = codec.decode_envelope(signed.raw)
    node.automine(False)
    try:
        assert node.send_raw(tx.raw) == signed.tx_hash  # the node had it already
        reply = node.request("eth_sendRawTransaction", "0x" + tx.raw.hex())
        assert "already imported" in reply["error"]["message"]

        assert await gateway.broadcast(signed) == signed.tx_hash

        assert node.pooled() == [signed.tx_hash]  # once
        node.mine()
    finally:
        node.automine(True)
    assert await gateway.balance(bob.address, ETH) == 10**15
    after = await send(gateway, ETH, alice, bob.address, 10**15)
    assert (node.transaction(after) or {})["nonce"] == "0x1"  # the known one holds nonce 0


# -- PLATFORM fee payer ---------------------------------------------------------------
@needs_anvil
async def test_platform_fee_payer_tops_up_over_http_then_the_token_moves(
    sepolia: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = sepolia
    gateway = connect(node)
    user, platform, bob = new_wallet(), funded(node), new_wallet()
    node.fund(user.address, USDT, 2_000_000)  # no ETH at all
    quote = await gateway.fee(
        user.address, bob.address, USDT, 2_000_000, fee_payer=platform.address
    )
    signed = await build(gateway, USDT, user, bob.address, 2_000_000, sponsor=platform)
    tx_hash = await gateway.broadcast(signed)

    [top_up_tx, main] = codec.decode_envelope(signed.raw)
    assert main.tx_hash == tx_hash
    node.wait_receipt(tx_hash)
    top_up, transfer = node.transaction(top_up_tx.tx_hash), node.transaction(tx_hash)
    assert top_up is not None and transfer is not None
    assert int(top_up["blockNumber"], 16) < int(transfer["blockNumber"], 16)  # mined first
    assert (int(top_up["from"], 16), int(top_up["to"], 16)) == (
        int(platform.address, 16),
        int(user.address, 16),
    )
    assert int(top_up["value"], 16) == int(transfer["gas"], 16) * int(transfer["maxFeePerGas"], 16)
    assert quote.native_units == int(top_up["value"], 16) + NATIVE_GAS * int(
        top_up["maxFeePerGas"], 16
    )
    node.mine(2)
    row = await gateway.lookup(user.address, USDT, tx_hash)
    assert (row.type, row.amount_units, row.status) == ("send", 2_000_000, "success")
    assert await gateway.balance(bob.address, USDT) == 2_000_000
    assert 10**18 - await gateway.balance(platform.address, ETH) <= quote.native_units
    assert await gateway.balance(user.address, ETH) == int(top_up["value"], 16) - row.fee_units


# -- token contracts per network ------------------------------------------------------
@needs_anvil
async def test_a_token_without_a_contract_on_the_network_is_a_clear_503(
    bsc_testnet: AnvilNode,
) -> None:
    plain = EvmGateway(  # BSC testnet's table, no WALLETCORE_EVM_TOKENS
        evm_config(Chain.BSC, "testnet"),
        rpc_web3(bsc_testnet.url, 5.0, Chain.BSC),
        validate_address,
    )
    alice = new_wallet()
    try:
        for call in (
            plain.balance(alice.address, BSC_USDT),
            plain.fee(alice.address, ELSEWHERE, BSC_USDT, 10),
            plain.history(alice.address, BSC_USDT, 10),
            plain.lookup(alice.address, BSC_USDT, "0x" + "ab" * 32),
            plain.prepare(
                Transfer(BSC_USDT, alice.address, ELSEWHERE, 10, alice.address), FeeQuote(10**15)
            ),
        ):
            with pytest.raises(AssetUnavailableOnEndpoint) as caught:
                await call
            assert caught.value.status == 503
            assert (
                caught.value.message == "USDT has no contract on BSC testnet; contact the operator"
            )
        assert await plain.balance(alice.address, BNB) == 0  # the node itself answers
    finally:
        await plain.aclose()
    sepolia = evm_config(Chain.ETHEREUM, "testnet")
    assert USDT.id not in sepolia.tokens and USDC.id in sepolia.tokens
    usdt = bsc_testnet.tokens[BSC_USDT.id]  # any checksummed contract
    with_usdt = evm_config(Chain.ETHEREUM, "testnet", {USDT.id: usdt})
    assert with_usdt.tokens == {**sepolia.tokens, USDT.id: usdt}


@needs_anvil
async def test_a_bsc_native_and_token_send_on_the_bsc_testnet_id(
    bsc_testnet: AnvilNode, connect: Callable[..., EvmGateway]
) -> None:
    node = bsc_testnet
    gateway = connect(node)
    alice, bob = new_wallet(), new_wallet()
    node.fund(alice.address, BNB, 10**18)
    node.fund(alice.address, BSC_USDT, 3 * 10**18)
    coin = await send(gateway, BNB, alice, bob.address, 10**15)
    token = await send(gateway, BSC_USDT, alice, bob.address, 2 * 10**18)
    for mined in (coin, token):
        node.wait_receipt(mined)
    node.mine(2)
    received = await gateway.lookup(bob.address, BNB, coin)
    assert (received.type, received.amount_units, received.status) == ("receive", 10**15, "success")
    moved = await gateway.lookup(bob.address, BSC_USDT, token)
    assert (moved.type, moved.amount_units, moved.status) == ("receive", 2 * 10**18, "success")
    assert await gateway.history(bob.address, BSC_USDT, 10) == [moved]
    assert (node.transaction(coin) or {})["chainId"] == hex(BSC_TESTNET)


# -- on the loopback test node: what anvil cannot serve ---------------------------------
async def rpc(node: EvmRpcNode, method: str, *params: Any) -> Any:
    """The test node's raw answer to one request over HTTP: its `result`, else its `error`."""
    answer = await asyncio.to_thread(node.call, method, *params)
    return answer["result"] if "result" in answer else answer["error"]


async def nonce_of(node: EvmRpcNode, tx_hash: str) -> int:
    return int((await rpc(node, "eth_getTransactionByHash", tx_hash))["nonce"], 16)


async def _funded(chain: DevnetEvmGateway, units: int = 10**18) -> Wallet:
    wallet = new_wallet()
    await chain.fund(wallet.address, ETH, units)
    return wallet


# The test node's own wire (it serves the tests below, so its answers must be geth's).
async def test_the_node_answers_in_geths_wire_format(
    chain: DevnetEvmGateway, serve: Callable[..., EvmRpcNode]
) -> None:
    node = serve(chain, chain_id=SEPOLIA)
    assert await rpc(node, "eth_chainId") == hex(SEPOLIA)
    block = await rpc(node, "eth_getBlockByNumber", "latest", True)
    assert block["number"].startswith("0x") and block["baseFeePerGas"].startswith("0x")
    assert len(bytes.fromhex(block["logsBloom"][2:])) == 256
    assert len(bytes.fromhex(block["extraData"][2:])) == 32  # Ethereum: no seal
    poor = Account.create()  # holds nothing
    raw = poor.sign_transaction(
        {
            "chainId": SEPOLIA,
            "nonce": 0,
            "to": ELSEWHERE,
            "value": 5,
            "gas": NATIVE_GAS,
            "maxFeePerGas": 2 * GWEI,
            "maxPriorityFeePerGas": GWEI,
        }
    ).raw_transaction
    cost = NATIVE_GAS * 2 * GWEI + 5
    assert await rpc(node, "eth_sendRawTransaction", "0x" + raw.hex()) == {
        "code": -32000,
        "message": (
            f"insufficient funds for gas * price + value: balance 0, tx cost {cost}, "
            f"overshot {cost}"
        ),
    }
    assert node.taken == []


# A node without `eth_feeHistory`: anvil always answers it.
async def test_a_node_without_fee_history_prices_from_the_latest_block(
    chain: DevnetEvmGateway,
    serve: Callable[..., EvmRpcNode],
    connect: Callable[..., EvmGateway],
) -> None:
    node = serve(chain, chain_id=SEPOLIA, no_fee_history=True)
    gateway = connect(node)
    refused = await rpc(node, "eth_feeHistory", "0x5", "latest", [50])
    assert refused["code"] == -32601
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    latest = await rpc(node, "eth_getBlockByNumber", "latest", False)
    tip = int(await rpc(node, "eth_maxPriorityFeePerGas"), 16)
    max_fee = 2 * int(latest["baseFeePerGas"], 16) + tip

    quote = await gateway.fee(alice.address, ELSEWHERE, ETH, 10**15)

    assert quote.native_units == NATIVE_GAS * max_fee
    tx_hash = await send(gateway, ETH, alice, ELSEWHERE, 10**15)
    assert (await rpc(node, "eth_getTransactionByHash", tx_hash))["type"] == "0x2"


# BSC and Polygon: 97-byte extraData (a validator's seal), which anvil's blocks never carry.
async def test_bsc_extra_data_breaks_a_bare_web3_and_rpc_web3_reads_it(
    bsc: DevnetEvmGateway, serve: Callable[..., EvmRpcNode]
) -> None:
    node = serve(bsc, chain_id=BSC_TESTNET, poa_extra_data=True)
    block = await rpc(node, "eth_getBlockByNumber", "latest", False)
    assert len(bytes.fromhex(block["extraData"][2:])) == 97
    bare = AsyncWeb3(AsyncHTTPProvider(node.url))
    with pytest.raises(ExtraDataLengthError):
        await bare.eth.get_block("latest")
    await bare.provider.disconnect()
    for chain, reads in ((Chain.BSC, True), (Chain.POLYGON, True), (Chain.ETHEREUM, False)):
        w3 = rpc_web3(node.url, 5.0, chain)
        try:
            if reads:
                assert (await w3.eth.get_block("latest"))["number"] == int(block["number"], 16)
            else:
                with pytest.raises(ExtraDataLengthError):
                    await w3.eth.get_block("latest")
        finally:
            await w3.provider.disconnect()


async def test_bsc_gateway_reads_poa_blocks_in_fee_lookup_and_history(
    bsc: DevnetEvmGateway,
    serve: Callable[..., EvmRpcNode],
    connect: Callable[..., EvmGateway],
) -> None:
    # no fee history: the fee reads the latest block, as history and lookup do
    node = serve(bsc, chain_id=BSC_TESTNET, poa_extra_data=True, no_fee_history=True)
    alice, bob = new_wallet(), new_wallet()
    await bsc.fund(alice.address, BNB, 10**18)
    await bsc.fund(alice.address, BSC_USDT, 3 * 10**18)
    unfixed = connect(node, web3_chain=Chain.ETHEREUM)  # rpc_web3 without the middleware
    with pytest.raises(NodeUnavailable):
        await unfixed.fee(alice.address, bob.address, BNB, 10**15)
    gateway = connect(node)

    latest = await rpc(node, "eth_getBlockByNumber", "latest", False)
    tip = int(await rpc(node, "eth_maxPriorityFeePerGas"), 16)
    quote = await gateway.fee(alice.address, bob.address, BNB, 10**15)
    assert quote.native_units == NATIVE_GAS * (2 * int(latest["baseFeePerGas"], 16) + tip)
    coin = await send(gateway, BNB, alice, bob.address, 10**15)
    token = await send(gateway, BSC_USDT, alice, bob.address, 2 * 10**18)
    node.mine(2)

    with pytest.raises(NodeUnavailable):  # the block's time: 97 bytes of extraData
        await unfixed.lookup(bob.address, BNB, coin)
    received = await gateway.lookup(bob.address, BNB, coin)
    assert (received.type, received.amount_units, received.status) == ("receive", 10**15, "success")
    assert await gateway.history(bob.address, BNB, 10) == [received]
    moved = await gateway.lookup(bob.address, BSC_USDT, token)
    assert (moved.type, moved.amount_units, moved.status) == ("receive", 2 * 10**18, "success")
    assert await gateway.history(bob.address, BSC_USDT, 10) == [moved]
    assert await gateway.balance(bob.address, BSC_USDT) == 2 * 10**18


# geth's, bsc's and bor's refusals, word for word: the test node says what it is told to
# (`refuse_sends`); anvil has its own words (the tests above meet them).
@pytest.mark.parametrize(
    ("message", "error", "status", "words"),
    [
        # geth >= 1.11 txpool (and bsc, bor)
        (
            (
                "insufficient funds for gas * price + value: balance 1000, tx cost "
                "21000000001000, overshot 21000000000000"
            ),
            InsufficientFunds,
            400,
            "Insufficient funds",
        ),
        # older geth / bsc state-transition wording
        (
            (
                "insufficient funds for gas * price + value: address "
                "0x52908400098527886E0F7030069857D2E4169EE7 have 0 want 21000000000000"
            ),
            InsufficientFunds,
            400,
            "Insufficient funds",
        ),
        ("intrinsic gas too low: have 20000, want 21000", InsufficientGas, 400, "Insufficient gas"),
        (
            "replacement transaction underpriced",
            TransferRejected,
            502,
            "waits in the node's pool at an equal or higher fee",
        ),
        ("nonce too low: next nonce 3, tx nonce 0", TransferRejected, 502, "nonce was used"),
        ("nonce too high: next nonce 0, tx nonce 3", TransferRejected, 502, "nonce gap"),
        # bor: Polygon's minimum tip
        (
            "transaction underpriced: gas tip cap 1000000000, minimum needed 25000000000",
            TransferRejected,
            502,
            "fee is below",
        ),
        (
            "transaction gas price below minimum: gas tip cap 0, minimum needed 100000000",
            TransferRejected,
            502,
            "fee is below",
        ),
        (
            (
                "max fee per gas less than block base fee: address "
                "0x52908400098527886E0F7030069857D2E4169EE7, maxFeePerGas: 1, baseFee: 7"
            ),
            TransferRejected,
            502,
            "fee is below",
        ),
        ("exceeds block gas limit", TransferRejected, 502, "block gas limit"),
        (
            "tx fee (1.50 ether) exceeds the configured cap (1.00 ether)",
            TransferRejected,
            502,
            "fee cap",
        ),
        ("txpool is full", TransferRejected, 502, "Transfer rejected by the network"),
    ],
)
async def test_a_nodes_refusal_in_its_own_words_maps_to_the_spec_and_sends_nothing(
    chain: DevnetEvmGateway,
    serve: Callable[..., EvmRpcNode],
    connect: Callable[..., EvmGateway],
    message: str,
    error: type[DomainError],
    status: int,
    words: str,
) -> None:
    node = serve(chain, chain_id=SEPOLIA)
    gateway = connect(node)
    alice, bob = await _funded(chain), new_wallet()
    signed = await build(gateway, ETH, alice, bob.address, 10**15)
    node.refuse_sends(message)
    with pytest.raises(error) as caught:
        await gateway.broadcast(signed)
    assert caught.value.status == status
    assert words in caught.value.message and "nothing was sent" in caught.value.message
    assert message not in caught.value.message  # the node's words stay in the adapter
    assert node.taken == [] and await gateway.balance(bob.address, ETH) == 0
    tx_hash = await send(gateway, ETH, alice, bob.address, 10**15)
    assert await nonce_of(node, tx_hash) == 0  # refused: its nonce is reused, no gap


@pytest.mark.parametrize("message", ["already known", "known transaction: 0x1234"])
async def test_already_known_counts_as_sent(
    chain: DevnetEvmGateway,
    serve: Callable[..., EvmRpcNode],
    connect: Callable[..., EvmGateway],
    message: str,
) -> None:
    node = serve(chain, chain_id=SEPOLIA)
    gateway = connect(node)
    alice, bob = await _funded(chain), new_wallet()
    signed = await build(gateway, ETH, alice, bob.address, 10**15)
    [tx] = codec.decode_envelope(signed.raw)
    chain.tester.send_raw_transaction("0x" + tx.raw.hex())  # the node had it already
    node.refuse_sends(message)

    assert await gateway.broadcast(signed) == signed.tx_hash

    assert node.taken == []  # not taken a second time
    assert await gateway.balance(bob.address, ETH) == 10**15
    after = await send(gateway, ETH, alice, bob.address, 10**15)
    assert await nonce_of(node, after) == 1  # the known one holds nonce 0


# The plugin's gateways read BSC's and Polygon's 97-byte extraData: the test node's blocks.
async def test_the_rpc_plugin_takes_token_overrides_and_reads_poa_blocks(
    tmp_path: Path, bsc: DevnetEvmGateway, serve: Callable[..., EvmRpcNode]
) -> None:
    node = serve(bsc, chain_id=BSC_TESTNET, poa_extra_data=True)
    usdt = Account.create().address  # a Sepolia USDT of the operator's choosing
    settings = EvmSettings(
        evm_network="testnet",
        ethereum_rpc_url=node.url,
        bsc_rpc_url=node.url,
        polygon_rpc_url=node.url,
        evm_tokens={**node.tokens, USDT.id: usdt},
    )
    gateways = chain_gateways(tmp_path, settings)
    eth, bnb, pol = gateways[Chain.ETHEREUM], gateways[Chain.BSC], gateways[Chain.POLYGON]
    try:
        assert eth.token_address(USDT) == usdt
        assert eth.token_address(USDC) == evm_config(Chain.ETHEREUM, "testnet").tokens[USDC.id]
        assert bnb.token_address(BSC_USDT) == bsc.token_address(BSC_USDT)
        alice = new_wallet()
        await bsc.fund(alice.address, BSC_USDT, 5 * 10**18)
        assert await bnb.balance(alice.address, BSC_USDT) == 5 * 10**18
        latest = int(await rpc(node, "eth_blockNumber"), 16)
        for poa in (bnb, pol):  # BSC and POLYGON read the 97-byte extraData
            assert (await poa.w3.eth.get_block("latest"))["number"] == latest
        with pytest.raises(ExtraDataLengthError):  # Ethereum's blocks carry no seal
            await eth.w3.eth.get_block("latest")
    finally:
        for gateway in (eth, bnb, pol):
            await gateway.aclose()


def test_a_token_override_must_be_a_checksummed_address_of_an_evm_token(
    tmp_path: Path,
) -> None:
    good = ELSEWHERE  # EIP-55's own example, checksummed
    for bad in (ELSEWHERE[:-2] + "e7", ELSEWHERE.lower()):  # a case typo; no checksum at all
        settings = EvmSettings(evm_network="testnet", evm_tokens={31: bad}, **NOWHERE)
        with pytest.raises(ConfigurationError, match="WALLETCORE_EVM_TOKENS") as caught:
            chain_gateways(tmp_path, settings)
        assert "asset 31 (USDT on BSC)" in str(caught.value) and bad not in str(caught.value)
    assert evm_config(Chain.BSC, "testnet", {31: good}).tokens == {31: good}
    with pytest.raises(ConfigurationError, match="asset 61"):
        evm_config(Chain.ETHEREUM, "testnet", {61: good})  # a Solana token


async def test_the_rpc_plugin_takes_the_receipt_timeout_history_depth_and_stuck_time(
    tmp_path: Path,
) -> None:
    tuned = EvmSettings(
        evm_network="testnet",
        evm_receipt_timeout_seconds=30,
        evm_history_blocks=500,
        evm_stuck_after_seconds=20,
        **NOWHERE,
    )
    built = chain_gateways(tmp_path, tuned)
    defaults = chain_gateways(tmp_path, EvmSettings(evm_network="testnet", **NOWHERE))
    try:
        for chain in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON):
            assert built[chain].config.history_blocks == 500
            assert built[chain]._receipt_timeout == 30.0
            assert defaults[chain].config.history_blocks == 2_000
            assert defaults[chain]._receipt_timeout == 120.0
            assert built[chain].stuck_after_seconds == 20.0
        assert {c: defaults[c].stuck_after_seconds for c in (Chain.ETHEREUM, Chain.BSC)} == {
            Chain.ETHEREUM: 180.0,
            Chain.BSC: 45.0,
        }
        assert defaults[Chain.POLYGON].stuck_after_seconds == 60.0
    finally:
        for gateways in (built, defaults):
            for chain in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON, Chain.SOLANA):
                await gateways[chain].aclose()


# -- a node of another chain -------------------------------------------------------------------
@needs_anvil
async def test_a_node_of_another_chain_is_refused_before_anything_is_signed(
    sepolia: AnvilNode,
) -> None:
    """A gateway for ETHEREUM mainnet (chain id 1) on a node at Sepolia's chain id (a dev
    node started without `--chain-id 1`, say): readiness names the mismatch, and a send is
    a 503 before any signature, with nothing in the node's pool."""
    node = sepolia
    w3 = rpc_web3(node.url, 5.0, Chain.ETHEREUM)
    gateway = EvmGateway(evm_config(Chain.ETHEREUM, "mainnet", node.tokens), w3, validate_address)
    try:
        with pytest.raises(CheckFailed) as wrong:
            await gateway.check()
        assert wrong.value.reason == (
            f"wrong chain: the ETHEREUM node serves chain id {SEPOLIA}, not 1 (mainnet)"
        )
        alice = funded(node)
        pooled = node.pooled()
        with pytest.raises(AssetUnavailableOnEndpoint) as refused:
            await build(gateway, ETH, alice, new_wallet().address, 10**15)
        assert refused.value.status == 503
        assert refused.value.message == (
            f"the ETHEREUM node serves chain id {SEPOLIA}, not 1 (mainnet): nothing was "
            "signed; contact the operator"
        )
        assert node.nonce(alice.address, "pending") == 0 and node.pooled() == pooled
    finally:
        await gateway.aclose()
