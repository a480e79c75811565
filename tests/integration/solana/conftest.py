"""Fixtures of the Solana gateway tests: one LiteSVM runtime per module, with the SPL
mints of the asset table; `chain` runs each gateway test twice: on the LiteSVM engine in
process, and on the JSON-RPC engine over real HTTP to the test node (`rpc_node`) serving
that same runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

pytest.register_assert_rewrite("sol_support")

from sol_support import RpcSolanaGateway

from walletcore_chains.addresses import validate_address
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.testing.solana_rpc_node import RpcTestNode


@pytest.fixture(scope="module")
def devnet() -> DevnetSolanaGateway:
    return DevnetSolanaGateway(validate_address, confirm_poll=0.05)


@pytest.fixture(scope="module")
def rpc_node(devnet: DevnetSolanaGateway) -> Iterator[RpcTestNode]:
    with RpcTestNode(devnet.node) as node:
        yield node


@pytest.fixture(params=["litesvm", "rpc"])
async def chain(
    request: pytest.FixtureRequest, devnet: DevnetSolanaGateway
) -> AsyncIterator[DevnetSolanaGateway | RpcSolanaGateway]:
    if request.param == "litesvm":
        yield devnet
        return
    node: RpcTestNode = request.getfixturevalue("rpc_node")
    gateway = RpcSolanaGateway(devnet, node.url)
    yield gateway
    await gateway.aclose()
