"""Fixtures of the client tests: one served sandbox and one fault proxy per test session
(per xdist worker), a fresh api client's credentials per module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if "client_support" not in sys.modules:
    pytest.register_assert_rewrite("client_support")

from client_support import Credentials, FaultProxy, Sandbox


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    served = Sandbox(tmp_path_factory.mktemp("client-sandbox"))
    served.start()
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="session")
def credentials(sandbox: Sandbox) -> Credentials:
    created = sandbox.cli("clients", "create", "--name", "Client tests")
    sandbox.cli("platform", "provision", "--client-id", created["clientId"])
    return Credentials(created["clientId"], created["apiKey"])


@pytest.fixture(scope="session")
def session_proxy(sandbox: Sandbox) -> Iterator[FaultProxy]:
    proxy = FaultProxy(sandbox.base_url)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def proxy(session_proxy: FaultProxy) -> FaultProxy:
    """The session's proxy, its counters and faults cleared for this test."""
    session_proxy.reset()
    return session_proxy


@pytest.fixture(scope="session")
def root() -> Path:
    return Path(__file__).resolve().parents[2]
