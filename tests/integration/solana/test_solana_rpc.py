"""The Solana gateway on the JSON-RPC engine, beyond the shared gateway tests: the preflight
before the send, an unreachable node (503, nothing sent), a send that times out after it
left (504, and the same bytes land once), a node answering nonsense (503, never a 500),
and the `solana` plugin's `rpc` gateway (URL and mints per network from its settings)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sol_support import RpcSolanaGateway, build, new_wallet

from walletcore.container import create_container
from walletcore.domain.assets import Chain
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    BroadcastTimeout,
    NodeUnavailable,
)
from walletcore.ports import FeeQuote, Transfer
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.plugin import EvmSettings
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.solana.plugin import SolanaSettings
from walletcore_chains.solana.rpc import RpcNode
from walletcore_chains.testing.solana_rpc_node import RpcTestNode

SOL, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(6),
    CONTRACT_CATALOG.asset_by_id(61),
    CONTRACT_CATALOG.asset_by_id(62),
)
SIGNATURE = "5" * 87


async def test_a_broadcast_simulates_first_then_sends_the_bytes(
    devnet: DevnetSolanaGateway, rpc_node: RpcTestNode
) -> None:
    chain = RpcSolanaGateway(devnet, rpc_node.url)
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    signed = await build(chain, SOL, alice, bob.address, 10**6)
    rpc_node.calls.clear()
    assert await chain.broadcast(signed) == signed.tx_hash
    sends = [c for c in rpc_node.calls if c in ("simulateTransaction", "sendTransaction")]
    assert sends == ["simulateTransaction", "sendTransaction"]
    rpc_node.calls.clear()
    assert await chain.broadcast(signed) == signed.tx_hash  # landed: not sent again
    assert "sendTransaction" not in rpc_node.calls
    await chain.aclose()


async def test_an_unreachable_node_is_a_503_with_a_retry_hint_and_sends_nothing(
    devnet: DevnetSolanaGateway,
) -> None:
    down = RpcSolanaGateway(devnet, "http://127.0.0.1:1", timeout=2.0)
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    for call in (
        down.balance(alice.address, SOL),
        down.balance(alice.address, USDT),
        down.fee(alice.address, bob.address, USDT, 10),
        down.prepare(Transfer(SOL, alice.address, bob.address, 10, alice.address), FeeQuote(1)),
        down.lookup(alice.address, SOL, SIGNATURE),
        down.history(alice.address, SOL, 10),
    ):
        with pytest.raises(NodeUnavailable) as caught:
            await call
        assert caught.value.status == 503 and "retry with backoff" in caught.value.message
    signed = await build(devnet, SOL, alice, bob.address, 10**6)
    with pytest.raises(NodeUnavailable) as sent:
        await down.broadcast(signed)
    assert sent.value.status == 503 and "nothing was sent" in sent.value.message
    await down.aclose()
    assert await devnet.balance(bob.address, SOL) == 0
    assert await devnet.broadcast(signed) == signed.tx_hash  # the same bytes, once back
    assert await devnet.balance(bob.address, SOL) == 10**6


async def test_a_send_that_times_out_is_an_unknown_outcome_and_lands_once(
    devnet: DevnetSolanaGateway, rpc_node: RpcTestNode
) -> None:
    slow = RpcSolanaGateway(devnet, rpc_node.url, timeout=0.3)
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    signed = await build(slow, SOL, alice, bob.address, 10**6)
    rpc_node.hang_seconds, rpc_node.hang_sends = 0.6, True
    try:
        with pytest.raises(BroadcastTimeout) as caught:
            await slow.broadcast(signed)
    finally:
        rpc_node.hang_sends = False
    assert caught.value.status == 504
    await slow.aclose()
    chain = RpcSolanaGateway(devnet, rpc_node.url)
    for _ in range(50):  # the node lands it once its wait is over
        if await chain.balance(bob.address, SOL):
            break
        await asyncio.sleep(0.05)
    assert await chain.broadcast(signed) == signed.tx_hash  # the same bytes: landed once
    assert await chain.balance(bob.address, SOL) == 10**6
    await chain.aclose()


async def test_a_node_answering_nonsense_is_a_503_never_a_500() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class Nonsense(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(500)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"oops!")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Nonsense)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        from walletcore_chains.solana.rpc import rpc_client

        url = f"http://127.0.0.1:{server.server_address[1]}"
        gateway = SolanaGateway(RpcNode(rpc_client(url, 2.0)), validate_address, {})
        with pytest.raises(NodeUnavailable) as caught:
            await gateway.balance(new_wallet().address, SOL)
        assert caught.value.status == 503 and "retry with backoff" in caught.value.message
        await gateway.aclose()
    finally:
        server.shutdown()
        server.server_close()


def build_rpc(tmp_path: Path, solana: SolanaSettings, **core: Any) -> dict[Chain, object]:
    """The gateways of `WALLETCORE_CHAINS=rpc`, with the `solana` plugin's settings (the EVM
    nodes, the Bitcoin indexer and the TRON node do not listen)."""
    evm = EvmSettings(
        ethereum_rpc_url="http://127.0.0.1:1/eth",
        bsc_rpc_url="http://127.0.0.1:1/bsc",
        polygon_rpc_url="http://127.0.0.1:1/polygon",
    )
    from walletcore_chains.bitcoin import BitcoinSettings
    from walletcore_chains.tron import TronSettings

    bitcoin = BitcoinSettings(bitcoin_esplora_url="http://127.0.0.1:1/esplora")
    tron = TronSettings(tron_node_url="http://127.0.0.1:1/tron")
    container = create_container(
        Settings(home=tmp_path, chains="rpc", **core),
        chain_settings={"evm": evm, "solana": solana, "bitcoin": bitcoin, "tron": tron},
    )
    return container.gateways()


URL = "http://127.0.0.1:1/solana"


def test_the_rpc_plugin_puts_solana_on_its_node_with_the_networks_mints(
    tmp_path: Path,
) -> None:
    mainnet = build_rpc(tmp_path, SolanaSettings(solana_rpc_url=URL))[Chain.SOLANA]
    assert isinstance(mainnet, SolanaGateway) and isinstance(mainnet.node, RpcNode)
    assert str(mainnet.mint(USDT)) == "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB"
    assert str(mainnet.mint(USDC)) == "EPjFWJd5AufqSSFgFujwMHefCDLhxNiZBF6nNcB5tMBS"
    testnet = build_rpc(tmp_path, SolanaSettings(solana_rpc_url=URL, solana_network="testnet"))[
        Chain.SOLANA
    ]
    assert isinstance(testnet, SolanaGateway)
    assert str(testnet.mint(USDC)) == "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"
    with pytest.raises(AssetUnavailableOnEndpoint):
        testnet.mint(USDT)  # no canonical devnet USDT
    mint = new_wallet().address
    configured = build_rpc(
        tmp_path,
        SolanaSettings(solana_rpc_url=URL, solana_network="testnet", solana_usdt_mint=mint),
    )[Chain.SOLANA]
    assert isinstance(configured, SolanaGateway) and str(configured.mint(USDT)) == mint
    assert (mainnet.commitment, mainnet.stuck_after_seconds) == ("finalized", 60.0)
    confirmed = build_rpc(
        tmp_path, SolanaSettings(solana_rpc_url=URL, solana_commitment="confirmed")
    )[Chain.SOLANA]
    assert isinstance(confirmed, SolanaGateway) and confirmed.commitment == "confirmed"


def test_the_rpc_plugin_needs_the_solana_url_and_valid_mints(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_rpc(tmp_path, SolanaSettings())
    assert str(caught.value) == (
        "WALLETCORE_SOLANA_RPC_URL (or WALLETCORE_RPC_SOLANA) is required by SOLANA's rpc gateway"
    )
    with pytest.raises(ConfigurationError, match="WALLETCORE_SOLANA_USDT_MINT"):
        build_rpc(tmp_path, SolanaSettings(solana_rpc_url=URL, solana_usdt_mint="not-a-mint"))
    with pytest.raises(ConfigurationError, match="=devnet has no Solana cluster"):
        build_rpc(tmp_path, SolanaSettings(solana_rpc_url=URL, solana_network="devnet"))
    with pytest.raises(ConfigurationError, match="WALLETCORE_SOLANA_CU_PRICE_MIN is above"):
        prices = {"solana_cu_price_min": 10, "solana_cu_price_max": 5}
        build_rpc(tmp_path, SolanaSettings(solana_rpc_url=URL, **prices))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            (
                "InstructionErrorCustom(1) Program 11111111111111111111111111111111 invoke [1] "
                "Transfer: insufficient lamports 10, need 1000000000"
            ),
            "Insufficient balance",
        ),
        (
            (
                "Transaction simulation failed: Error processing Instruction 1: custom program "
                "error: 0x1"
            ),
            "Insufficient balance",
        ),
        ("Transaction simulation failed: Blockhash not found", "expired"),
        ("InsufficientFundsForFee", "network fee"),
    ],
)
def test_a_nodes_refusal_words_read_like_the_litesvm_ones(text: str, words: str) -> None:
    from walletcore_chains.solana.errors import refusal

    refused = refusal(text)
    assert words in str(refused) and "nothing was sent" in str(refused)
    assert refusal("custom program error: 0x10").__class__.__name__ == "TransferRejected"


async def test_a_transaction_that_landed_and_failed_reads_failed(
    devnet: DevnetSolanaGateway,
) -> None:
    from dataclasses import replace

    from walletcore_chains.solana.rows import row

    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    signature = await devnet.broadcast(await build(devnet, SOL, alice, bob.address, 10**6))
    executed = await devnet.node.executed(signature)
    assert executed is not None
    failed = row(alice.address, None, replace(executed, err="InstructionError(0, Custom(1))"))
    assert failed is not None and failed.status == "failed"
