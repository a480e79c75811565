"""EVM sends from one address through gateways of several "processes" (each its own
`NonceBook`) sharing one store's nonce leases, and how the `evm` plugin's `rpc` gateways
are wired: the container hands its nonce leases to the gateway factories, each EVM
gateway reserves on them per chain id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from evm_support import ELSEWHERE, NOWHERE, build, chain_gateways, new_wallet, send

from walletcore.container import create_container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.ports import NonceLeases
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, LocalNonceLeases
from walletcore_chains.addresses import validate_address
from walletcore_chains.bitcoin import BitcoinSettings
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.nonces import NonceBook
from walletcore_chains.evm.plugin import EvmSettings
from walletcore_chains.solana.plugin import SolanaSettings
from walletcore_chains.tron import TronSettings
from walletcore_sql.engine import sqlite_url
from walletcore_sql.nonces import nonce_leases
from walletcore_sql.storage import SqlStorage

ETH = CONTRACT_CATALOG.asset_by_id(2)
EVM = (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)


@pytest.fixture(params=["memory", "sqlite"])
async def leases(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[NonceLeases]:
    if request.param == "memory":
        yield LocalNonceLeases()
        return
    storage = SqlStorage(sqlite_url(tmp_path / "walletcore.db"), migrate=True)
    try:
        yield nonce_leases(storage.database)
    finally:
        await storage.aclose()


def process_gateway(chain: DevnetEvmGateway, leases: NonceLeases) -> EvmGateway:
    """A gateway on the same node as another process's would be: its own NonceBook."""
    return EvmGateway(
        chain.config,
        chain.w3,
        validate_address,
        tokens={},
        nonces=NonceBook(leases=leases, chain="eip155:devnet-test"),
    )


async def test_twenty_sends_through_two_processes_gateways_all_land_in_nonce_order(
    chain: DevnetEvmGateway, leases: NonceLeases
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    start = await chain.w3.eth.get_transaction_count(alice.address)
    first, second = process_gateway(chain, leases), process_gateway(chain, leases)

    async def one(i: int) -> str:
        gateway = first if i % 2 else second
        await asyncio.sleep(0.001 * (i % 3))
        signed = await build(gateway, ETH, alice, ELSEWHERE, 10**12 + i)
        await asyncio.sleep(0.002)  # storing the signed bytes: other sends run meanwhile
        return await gateway.broadcast(signed)

    hashes = await asyncio.gather(*(one(i) for i in range(20)))

    txs = [await chain.w3.eth.get_transaction(h) for h in hashes]
    assert sorted(t["nonce"] for t in txs) == list(range(start, start + 20))
    for h in hashes:
        assert (await chain.lookup(alice.address, ETH, h)).status == "success"
    assert await chain.w3.eth.get_transaction_count(alice.address) == start + 20


async def test_a_transfer_one_process_never_broadcast_is_reused_by_another(
    chain: DevnetEvmGateway, leases: NonceLeases
) -> None:
    from walletcore.ports import Transfer

    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    first, second = process_gateway(chain, leases), process_gateway(chain, leases)
    quote = await first.fee(alice.address, ELSEWHERE, ETH, 10**15)
    abandoned = await first.prepare(
        Transfer(ETH, alice.address, ELSEWHERE, 10**15, alice.address), quote
    )
    waiting = asyncio.ensure_future(send(second, ETH, alice, ELSEWHERE, 10**15))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # the other process waits for the lease
    await first.release(abandoned)  # signing failed there
    tx_hash = await asyncio.wait_for(waiting, 30)
    assert (await chain.w3.eth.get_transaction(tx_hash))["nonce"] == 0  # no gap


def test_rpc_gateways_reserve_nonces_on_the_deployments_leases_per_chain_id(
    tmp_path: Path,
) -> None:
    leases = LocalNonceLeases()
    gateways = chain_gateways(
        tmp_path, EvmSettings(evm_network="testnet", **NOWHERE), overrides={"nonce_leases": leases}
    )
    for chain in EVM:
        gateway = gateways[chain]
        assert isinstance(gateway, EvmGateway)
        assert gateway.nonces.leases is leases
        assert gateway.nonces.chain == f"eip155:{gateway.config.chain_id}"
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway) and eth.nonces.chain == "eip155:11155111"


def test_the_container_hands_its_nonce_leases_to_the_rpc_gateways(tmp_path: Path) -> None:
    container = create_container(
        Settings(home=tmp_path, chains="rpc"),
        chain_settings={
            "evm": EvmSettings(**NOWHERE),
            "solana": SolanaSettings(solana_rpc_url="http://127.0.0.1:1/solana"),
            "bitcoin": BitcoinSettings(bitcoin_esplora_url="http://127.0.0.1:1/esplora"),
            "tron": TronSettings(tron_node_url="http://127.0.0.1:1/tron"),
        },
    )
    eth = container.gateways()[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway)
    assert eth.nonces.leases is container.nonce_leases() and eth.nonces.chain == "eip155:1"


def test_only_gateways_that_reserve_nonces_open_the_leases(tmp_path: Path) -> None:
    """The devnet and the sandbox ledger never ask for the leases (a storage without them
    still runs there); the rpc gateways do, when they are built."""

    class NoLeases:
        def __call__(self) -> None:
            raise AssertionError("the leases were opened")

    from dependency_injector import providers

    for chains in ("devnet", "sandbox"):
        container = create_container(Settings(home=tmp_path, chains=chains))
        container.nonce_leases.override(providers.Callable(NoLeases()))
        assert set(container.gateways()) == set(CONTRACT_CHAINS)
    container = create_container(
        Settings(home=tmp_path, chains="rpc"),
        chain_settings={
            "evm": EvmSettings(**NOWHERE),
            "solana": SolanaSettings(solana_rpc_url="http://127.0.0.1:1/solana"),
            "bitcoin": BitcoinSettings(bitcoin_esplora_url="http://127.0.0.1:1/esplora"),
            "tron": TronSettings(tron_node_url="http://127.0.0.1:1/tron"),
        },
    )
    container.nonce_leases.override(providers.Callable(NoLeases()))
    with pytest.raises(AssertionError, match="the leases were opened"):
        container.gateways()


def test_devnet_chains_keep_their_nonces_in_the_process(tmp_path: Path) -> None:
    """A devnet chain lives and dies with its process: floors shared with other workers,
    or kept across restarts, would point past its nonces."""
    gateways = chain_gateways(tmp_path, EvmSettings(), chains="devnet")
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, DevnetEvmGateway) and eth.nonces.leases is None


async def test_a_slow_top_up_keeps_the_senders_nonce_past_the_lapse(
    chain: DevnetEvmGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sponsored transfer holds the sender's nonce while its top-up is mined: however
    long that takes (up to the receipt timeout), another send from the address waits."""
    usdt = CONTRACT_CATALOG.asset_by_id(21)
    gateway = EvmGateway(
        chain.config,
        chain.w3,
        validate_address,
        tokens={usdt.id: chain.token_address(usdt)},
        nonces=NonceBook(lease=0.3),
        receipt_timeout=10.0,
    )
    user, platform = new_wallet(), new_wallet()
    await chain.fund(user.address, usdt, 5_000_000)
    await chain.fund(platform.address, ETH, 10**18)
    mined_slowly = chain.w3.eth.wait_for_transaction_receipt

    async def slow_receipt(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(0.8)  # the top-up takes longer than the 0.3 s lapse to mine
        return await mined_slowly(*args, **kwargs)

    monkeypatch.setattr(chain.w3.eth, "wait_for_transaction_receipt", slow_receipt)

    async def sponsored(units: int) -> str:
        return await send(gateway, usdt, user, ELSEWHERE, units, sponsor=platform)

    first = asyncio.ensure_future(sponsored(1_000_000))
    await asyncio.sleep(0.1)
    second = asyncio.ensure_future(sponsored(2_000_000))
    hashes = await asyncio.wait_for(asyncio.gather(first, second), 30)
    nonces = sorted([(await chain.w3.eth.get_transaction(h))["nonce"] for h in hashes])
    assert nonces == [0, 1]  # never two transfers on one nonce
    assert await chain.balance(user.address, usdt) == 2_000_000
