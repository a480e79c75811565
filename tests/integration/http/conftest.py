"""HTTP tests: the Litestar app over a container with a manual clock, the in-memory storage
and the real sealed KeyStore at its cheapest Argon2id setting."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from dependency_injector import providers
from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.settings import Settings
from walletcore.testing import FixedHoldings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_litestar import create_app

pytest.register_assert_rewrite("http_support")

from http_support import Api, judge_responses, sign_in

#: Argon2id at its cheapest: these tests are about HTTP, not the KDF cost.
FAST_KDF = KdfParams(opslimit=1, memlimit=64 * 1024)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings come from the test, never from the developer's WALLETCORE_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """Override in a test module to change the environment (limited assets, ...)."""
    return {}


@pytest.fixture
def settings(tmp_path: Any, settings_overrides: dict[str, Any]) -> Settings:
    return Settings(home=tmp_path / "home", repo="memory", **settings_overrides)


@pytest.fixture
def keystore() -> SealedKeyStore:
    return SealedKeyStore(secrets.token_bytes(32), kdf=FAST_KDF, allow_weak_kdf=True)


@pytest.fixture
def real_holdings() -> bool:
    """Override with True in a module whose sells read the wallets' balances on chain
    (`walletcore.services.holdings`); elsewhere users hold plenty of every asset
    (`FixedHoldings`), since their wallets have no addresses (`Api.new_user`)."""
    return False


@pytest.fixture
def container(
    settings: Settings, clock: ManualClock, keystore: SealedKeyStore, real_holdings: bool
) -> Container:
    built = create_container(settings, clock=clock, keystore=keystore)
    if not real_holdings:
        built.holdings.override(providers.Object(FixedHoldings(storage=built.storage())))
    return built


@pytest.fixture
def app(container: Container) -> Litestar:
    return create_app(container)


@pytest.fixture
async def http(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """The test client; every response it receives is held to the served OpenAPI document."""
    async with AsyncTestClient(app) as client:
        yield await judge_responses(client)


@pytest.fixture
async def api(http: AsyncTestClient[Litestar], container: Container) -> Api:
    return await sign_in(http, container)


@pytest.fixture
async def user_id(api: Api) -> str:
    return await api.new_user()
