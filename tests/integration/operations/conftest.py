"""Operations tests: the app over a container with a manual clock and the in-memory storage
(as the HTTP tests), with operations settings of the test's choosing. One test client: the
API's responses are held to the served OpenAPI document, the operations endpoints (outside
the document) are not."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.settings import Settings
from walletcore.testing import FixedHoldings
from walletcore_litestar import create_app
from walletcore_litestar.operations import OPERATIONS_PATHS, OperationsSettings

sys.path.insert(0, str(Path(__file__).parents[1] / "http"))
pytest.register_assert_rewrite("http_support")

from http_support import DOCUMENT_PATH, Api, served_document, sign_in


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings come from the test, never from the developer's variables."""
    for name in list(os.environ):
        if name.startswith("WALLETCORE_") or name == "PROMETHEUS_MULTIPROC_DIR":
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", repo="memory")


@pytest.fixture
def operations() -> OperationsSettings:
    """Override in a test module (or with `indirect`) for a metrics token, a timeout."""
    return OperationsSettings()


@pytest.fixture
def overrides() -> dict[str, Any]:
    """Adapters to put in the container (`create_container(settings, **overrides)`)."""
    return {}


@pytest.fixture
def container(settings: Settings, clock: ManualClock, overrides: dict[str, Any]) -> Container:
    built = create_container(settings, clock=clock, **overrides)
    built.holdings.override(providers.Object(FixedHoldings(storage=built.storage())))
    return built


@pytest.fixture
def app(container: Container, operations: OperationsSettings) -> Litestar:
    return create_app(container, operations=operations)


@pytest.fixture
async def http(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app) as client:
        yield await judge_api_responses(client)


@pytest.fixture
async def api(http: AsyncTestClient[Litestar], container: Container) -> Api:
    return await sign_in(http, container)


async def judge_api_responses(client: AsyncTestClient[Litestar]) -> AsyncTestClient[Litestar]:
    """`http_support.judge_responses`, but for the API only: the operations endpoints
    answer outside the document (and their own tests check them)."""
    fetched = await client.get(DOCUMENT_PATH)
    assert fetched.status_code == 200, fetched.text
    document = served_document(fetched.content)

    async def judge(response: Any) -> None:
        path = response.request.url.path
        if not path.startswith("/schema") and path not in OPERATIONS_PATHS:
            await response.aread()
            document.check(response.request.method, path, response)

    client.event_hooks = {
        **client.event_hooks,
        "response": [*client.event_hooks["response"], judge],
    }
    return client
