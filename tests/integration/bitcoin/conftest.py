"""Fixtures of the Bitcoin gateway tests: a real `bitcoind -regtest` per test process
(installed by `python3 dev.py test`, else skipped saying why), the loopback Esplora API on
it, and a `BitcoinGateway` on each backend."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind
from walletcore_chains.testing.esplora_server import EsploraTestServer

pytest.register_assert_rewrite("btc_support")


@pytest.fixture(autouse=True)
def regtest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Addresses of this process are regtest's (`bcrt1`) for the test's length only."""
    monkeypatch.setenv("WALLETCORE_BITCOIN_NETWORK", "regtest")


@pytest.fixture(scope="session")
def node() -> Iterator[Bitcoind]:
    binary = find_bitcoind()
    if binary is None:
        pytest.skip(
            "no bitcoind: run the tests with `python3 dev.py test` (it installs one under "
            ".venv/bitcoind) or set WALLETCORE_BITCOIND"
        )
    started = Bitcoind(binary).start()
    started.mine(101)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def esplora(node: Bitcoind) -> Iterator[EsploraTestServer]:
    with EsploraTestServer(node.plain_url, (node.user, node.password)) as server:
        yield server


@pytest.fixture(params=["core", "esplora"])
async def gateway(request: pytest.FixtureRequest, node: Bitcoind) -> AsyncIterator[object]:
    from btc_support import make_gateway

    url = node.url if request.param == "core" else request.getfixturevalue("esplora").url
    gw = make_gateway(request.param, url)
    try:
        yield gw
    finally:
        await gw.aclose()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    os.environ.setdefault("no_proxy", "127.0.0.1,localhost")
