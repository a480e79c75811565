"""The JSON-RPC client's HTTP sessions (walletcore_chains.evm.sessions): calls go on when
web3's process-wide session lock is held for good (as a cancelled call can leave it), and
cancelled calls leave nothing behind that stops the next ones; one session per event loop
and endpoint, closed by the gateway's `aclose`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from web3._utils.http_session_manager import HTTPSessionManager

from walletcore.domain.assets import Chain
from walletcore_chains.evm.plugin import rpc_web3
from walletcore_chains.evm.sessions import LoopSessions
from walletcore_chains.testing.anvil import AnvilNode, find_anvil

pytestmark = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode(Chain.ETHEREUM, block_time=None) as started:
        yield started


async def test_calls_go_on_while_web3s_own_session_lock_is_held(node: AnvilNode) -> None:
    w3 = rpc_web3(node.url, 5.0, Chain.ETHEREUM)
    assert isinstance(w3.provider._request_session_manager, LoopSessions)
    held = HTTPSessionManager._lock
    assert held.acquire(timeout=5)  # what an orphaned acquire leaves behind
    try:
        assert await asyncio.wait_for(w3.eth.chain_id, 10) == 1
        heights = await asyncio.wait_for(
            asyncio.gather(*(w3.eth.block_number for _ in range(20))), 10
        )
        assert len(set(heights)) == 1
    finally:
        held.release()
        await w3.provider.disconnect()


async def test_cancelled_calls_leave_the_next_ones_free(node: AnvilNode) -> None:
    w3 = rpc_web3(node.url, 5.0, Chain.ETHEREUM)
    try:
        for _ in range(5):
            calls = [asyncio.ensure_future(w3.eth.block_number) for _ in range(20)]
            await asyncio.sleep(0)
            for call in calls[::2]:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
        assert await asyncio.wait_for(w3.eth.chain_id, 10) == 1
        sessions = w3.provider._request_session_manager.session_cache
        assert len(sessions) == 1  # one session for this loop and endpoint
    finally:
        await w3.provider.disconnect()
    assert len(w3.provider._request_session_manager.session_cache) == 0


def test_each_event_loop_gets_a_session_of_its_own(node: AnvilNode) -> None:
    w3 = rpc_web3(node.url, 5.0, Chain.ETHEREUM)
    manager = w3.provider._request_session_manager

    async def call() -> set[int]:
        assert await w3.eth.chain_id == 1
        return {id(session) for _, session in manager.session_cache.items()}

    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]  # kept: ids not reused
    try:
        first = loops[0].run_until_complete(call())
        loops[0].close()
        second = loops[1].run_until_complete(call())  # a session of this loop's own
        assert len(first) == 1 and len(second) == 2 and first < second
        loops[1].run_until_complete(w3.provider.disconnect())
    finally:
        for loop in loops:
            loop.close()
