"""EVM sends from one address through gateways of several "processes" (each its own
`NonceBook`) sharing one store's nonce leases, and how the `rpc` profile wires them: the
container hands the repo to the chain builders, each EVM gateway reserves on its leases
per chain id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from evm_support import ELSEWHERE, build, new_wallet, send

from walletcore import plugins
from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.domain.assets import Chain, asset_by_id
from walletcore.ports import NonceLeases
from walletcore.sandbox.repo import InMemoryRepo
from walletcore.settings import Settings
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.nonces import NonceBook
from walletcore_chains.signatures import verify_signature
from walletcore_sql.engine import sqlite_url
from walletcore_sql.repo import SqlRepo

ETH = asset_by_id(2)
EVM = (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)
RPC = {
    "rpc_ethereum": "http://127.0.0.1:1/eth",
    "rpc_bsc": "http://127.0.0.1:1/bsc",
    "rpc_polygon": "http://127.0.0.1:1/polygon",
    "rpc_solana": "http://127.0.0.1:1/solana",
}


@pytest.fixture(params=["memory", "sqlite"])
async def leases(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[NonceLeases]:
    if request.param == "memory":
        yield InMemoryRepo().nonce_leases()
        return
    repo = SqlRepo(sqlite_url(tmp_path / "walletcore.db"), migrate=True)
    try:
        yield repo.nonce_leases()
    finally:
        await repo.aclose()


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


def _build(name: str, settings: Settings, **extra: object) -> dict[Chain, object]:
    return plugins.build(  # type: ignore[no-any-return]
        "walletcore.chains",
        name,
        settings=settings,
        clock=ManualClock(),
        address_validator=validate_address,
        signature_verifier=verify_signature,
        **extra,
    )


def test_rpc_gateways_reserve_nonces_on_the_repos_leases_per_chain_id(tmp_path: Path) -> None:
    repo = InMemoryRepo()
    gateways = _build("rpc", Settings(home=tmp_path, network="testnet", **RPC), repo=repo)
    for chain in EVM:
        gateway = gateways[chain]
        assert isinstance(gateway, EvmGateway)
        assert gateway.nonces.leases is repo.nonce_leases()
        assert gateway.nonces.chain == f"eip155:{gateway.config.chain_id}"
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway) and eth.nonces.chain == "eip155:11155111"
    # without a repo (a caller of the entry point that has none): this process only
    alone = _build("rpc", Settings(home=tmp_path, **RPC))[Chain.BSC]
    assert isinstance(alone, EvmGateway) and alone.nonces.leases is None


def test_rpc_refuses_a_repo_without_nonce_leases(tmp_path: Path) -> None:
    from walletcore.secretfiles import ConfigurationError

    class OldRepo:
        """A third-party repo written before the leases."""

    with pytest.raises(ConfigurationError, match="OldRepo has no nonce_leases"):
        _build("rpc", Settings(home=tmp_path, **RPC), repo=OldRepo())


def test_the_container_hands_its_repo_to_the_chain_builders(tmp_path: Path) -> None:
    repo = InMemoryRepo()
    settings = Settings(home=tmp_path, chains="rpc", **RPC)
    gateways = create_container(settings, repo=repo).gateways()
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, EvmGateway)
    assert eth.nonces.leases is repo.nonce_leases() and eth.nonces.chain == "eip155:1"


def test_devnet_chains_keep_their_nonces_in_the_process(tmp_path: Path) -> None:
    """A devnet chain lives and dies with its process: floors shared with other workers,
    or kept across restarts, would point past its nonces."""
    gateways = _build("devnet", Settings(home=tmp_path), repo=InMemoryRepo())
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, DevnetEvmGateway) and eth.nonces.leases is None


async def test_a_slow_top_up_keeps_the_senders_nonce_past_the_lapse(
    chain: DevnetEvmGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sponsored transfer holds the sender's nonce while its top-up is mined: however
    long that takes (up to the receipt timeout), another send from the address waits."""
    usdt = asset_by_id(21)
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
