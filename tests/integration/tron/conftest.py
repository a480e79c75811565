"""Fixtures of the TRON gateway tests: a loopback TRON node per test and a `TronGateway`
on it over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from walletcore_chains.testing.tron_node import TronTestNode

pytest.register_assert_rewrite("tron_support")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def node() -> Iterator[TronTestNode]:
    with TronTestNode() as started:
        yield started


@pytest.fixture
async def gateway(node: TronTestNode) -> AsyncIterator[object]:
    from tron_support import make_gateway

    gw = make_gateway(node)
    try:
        yield gw
    finally:
        await gw.aclose()


@pytest.fixture(scope="session")
def tronweb() -> Path:
    from tron_support import tronweb_dir

    found = tronweb_dir()
    if found is None:
        pytest.skip(
            "tronweb is not installed: run the tests with `python3 dev.py test`, which "
            "installs it under .venv/tronweb with npm"
        )
    return found
