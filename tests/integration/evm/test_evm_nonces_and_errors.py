"""Nonce safety under concurrency, released nonces, and node errors read into the spec's
statuses (insufficient funds / gas: 400; unreachable node: 503 with a retry hint)."""

from __future__ import annotations

import asyncio

import pytest
from evm_support import ELSEWHERE, build, new_wallet, send

from walletcore.domain.assets import Chain
from walletcore.domain.errors import (
    HistoryUnavailable,
    InsufficientFunds,
    InsufficientGas,
    NodeUnavailable,
    TransferRejected,
)
from walletcore.ports import FeeQuote, SignedTransfer, Transfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.chains import rpc_web3
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway

ETH, USDT = CONTRACT_CATALOG.asset_by_id(2), CONTRACT_CATALOG.asset_by_id(21)


async def test_twenty_concurrent_sends_from_one_address_all_land_in_nonce_order(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    start = await chain.w3.eth.get_transaction_count(alice.address)

    async def one(i: int) -> str:
        await asyncio.sleep(0.001 * (i % 3))  # interleave prepare, sign and broadcast
        return await send(chain, ETH, alice, ELSEWHERE, 10**12 + i)

    hashes = await asyncio.gather(*(one(i) for i in range(20)))

    assert len(set(hashes)) == 20
    txs = [await chain.w3.eth.get_transaction(h) for h in hashes]
    assert sorted(t["nonce"] for t in txs) == list(range(start, start + 20))
    for h in hashes:
        assert (await chain.lookup(alice.address, ETH, h)).status == "success"
    assert await chain.w3.eth.get_transaction_count(alice.address) == start + 20


async def test_a_transfer_never_broadcast_gives_its_nonce_back(chain: DevnetEvmGateway) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    quote = await chain.fee(alice.address, ELSEWHERE, ETH, 10**15)
    transfer = Transfer(ETH, alice.address, ELSEWHERE, 10**15, alice.address)
    abandoned = await chain.prepare(transfer, quote)
    assert chain.nonces.held(alice.address) == 0
    await chain.release(abandoned)  # signing failed (a wrong password, say)
    assert chain.nonces.held(alice.address) is None
    tx_hash = await send(chain, ETH, alice, ELSEWHERE, 10**15)
    assert (await chain.w3.eth.get_transaction(tx_hash))["nonce"] == 0  # reused, no gap


async def test_insufficient_funds_is_a_clear_400_and_frees_the_nonce(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**15)
    signed = await build(chain, ETH, alice, ELSEWHERE, 10**18)  # more than it holds
    with pytest.raises(InsufficientFunds) as caught:
        await chain.broadcast(signed)
    assert caught.value.status == 400 and "nothing was sent" in caught.value.message
    tx_hash = await send(chain, ETH, alice, ELSEWHERE, 10**14)
    assert (await chain.w3.eth.get_transaction(tx_hash))["nonce"] == 0


async def test_insufficient_gas_for_a_token_transfer_is_a_clear_400(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, USDT, 1_000_000)  # tokens, but no ETH for the gas
    signed = await build(chain, USDT, alice, ELSEWHERE, 1_000)
    with pytest.raises(InsufficientGas) as caught:
        await chain.broadcast(signed)
    assert (
        caught.value.status == 400 and "ETH cannot pay the transfer's gas" in caught.value.message
    )
    assert await chain.balance(ELSEWHERE, USDT) == 0


async def test_a_gas_limit_below_the_intrinsic_gas_is_a_clear_400(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    quote = await chain.fee(alice.address, ELSEWHERE, ETH, 10**15)
    unsigned = await chain.prepare(
        Transfer(ETH, alice.address, ELSEWHERE, 10**15, alice.address), quote
    )
    from walletcore_chains.evm import codec

    [tx] = codec.decode_body(unsigned.body)
    tx.fields["gas"] = 20_000  # below 21,000
    low = codec.SignedTx(alice.address, tx.nonce, tx.signed(alice.key.sign(tx.digest())), 10**15)
    with pytest.raises(InsufficientGas):
        await chain.broadcast(SignedTransfer(codec.encode_envelope([low]), low.tx_hash))


async def test_a_used_nonce_from_another_transaction_is_rejected_not_sent(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    await send(chain, ETH, alice, ELSEWHERE, 10**15)  # nonce 0
    twin_quote = await chain.fee(alice.address, ELSEWHERE, ETH, 10**15)
    from walletcore_chains.evm import codec

    unsigned = await chain.prepare(
        Transfer(ETH, alice.address, ELSEWHERE, 7, alice.address), twin_quote
    )
    await chain.release(unsigned)
    [tx] = codec.decode_body(unsigned.body)
    tx.fields["nonce"] = 0  # the nonce the first transfer used
    twin = codec.SignedTx(alice.address, 0, tx.signed(alice.key.sign(tx.digest())), 7)
    with pytest.raises(TransferRejected):
        await chain.broadcast(SignedTransfer(codec.encode_envelope([twin]), twin.tx_hash))


async def test_a_malformed_signed_transfer_is_rejected(chain: DevnetEvmGateway) -> None:
    with pytest.raises(TransferRejected):
        await chain.broadcast(SignedTransfer(b"not an envelope", "0x00"))


async def test_an_unreachable_node_is_a_503_with_a_retry_hint() -> None:
    down = EvmGateway(
        evm_config(Chain.ETHEREUM, "mainnet"), rpc_web3("http://127.0.0.1:1", 2.0), validate_address
    )
    wallet = new_wallet()
    for call in (
        down.balance(wallet.address, ETH),
        down.balance(wallet.address, USDT),
        down.fee(wallet.address, ELSEWHERE, USDT, 10),
        down.prepare(
            Transfer(ETH, wallet.address, ELSEWHERE, 10, wallet.address), FeeQuote(10**15)
        ),
        down.lookup(wallet.address, ETH, "0x" + "ab" * 32),
    ):
        with pytest.raises(NodeUnavailable) as caught:
            await call
        assert caught.value.status == 503 and "retry with backoff" in caught.value.message
    with pytest.raises(HistoryUnavailable) as history:
        await down.history(wallet.address, ETH, 10)
    assert history.value.status == 503 and "retry with backoff" in history.value.message
    await down.aclose()


async def test_a_broadcast_to_an_unreachable_node_is_a_503_and_sends_nothing(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    signed = await build(chain, ETH, alice, ELSEWHERE, 10**15)
    before = await chain.balance(ELSEWHERE, ETH)
    down = EvmGateway(chain.config, rpc_web3("http://127.0.0.1:1", 2.0), validate_address)
    with pytest.raises(NodeUnavailable) as caught:
        await down.broadcast(signed)
    await down.aclose()
    assert caught.value.status == 503
    assert await chain.balance(ELSEWHERE, ETH) == before
    assert await chain.broadcast(signed) == signed.tx_hash  # the same bytes, once back
    assert await chain.balance(ELSEWHERE, ETH) == before + 10**15


async def test_a_node_that_takes_the_request_and_never_answers_is_an_unknown_outcome(
    chain: DevnetEvmGateway,
) -> None:
    from walletcore.domain.errors import BroadcastTimeout

    done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)  # the request arrived; no answer comes
        await done.wait()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    signed = await build(chain, ETH, alice, ELSEWHERE, 10**15)
    slow = EvmGateway(chain.config, rpc_web3(f"http://127.0.0.1:{port}", 0.3), validate_address)
    try:
        with pytest.raises(BroadcastTimeout) as caught:
            await slow.broadcast(signed)
        assert caught.value.status == 504  # never "refused": it may have been taken
    finally:
        await slow.aclose()
        done.set()
        server.close()
        await server.wait_closed()
    assert await chain.broadcast(signed) == signed.tx_hash  # the retry sends the same bytes
