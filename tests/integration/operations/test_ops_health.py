"""`GET /health/live` and `GET /health/ready`: no token, outside the OpenAPI document, the
readiness body naming each check and never a secret."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from dependency_injector import providers
from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.ports import CheckFailed
from walletcore.services.health import failure_name
from walletcore.testing.storage import InMemoryStorage
from walletcore_litestar.operations import OperationsSettings

#: What a failing adapter's error text carries: a check must never show it.
SECRET = "sk_live_0123456789abcdef"


class UnreachableStorage(InMemoryStorage):
    async def check(self) -> None:
        raise ConnectionRefusedError(f"postgresql://walletcore:{SECRET}@db:5432/walletcore")


class NodeDown:
    """A chain gateway that only answers (badly) its health check."""

    def __init__(self, chain: Chain, error: Exception | None = None) -> None:
        self.chain = chain
        self.error = error

    async def check(self) -> None:
        if self.error is None:  # hangs: the check's timeout decides
            await asyncio.sleep(30)
        raise self.error


async def ready(http: AsyncTestClient[Litestar]) -> tuple[int, dict[str, Any]]:
    answer = await http.get("/health/ready")
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.headers["cache-control"] == "no-store" and answer.headers["x-request-id"]
    return answer.status_code, answer.json()


async def test_live_answers_without_a_token(http: AsyncTestClient[Litestar]) -> None:
    answer = await http.get("/health/live", headers={"X-Request-Id": "probe-1"})
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}
    assert answer.headers["x-request-id"] == "probe-1"
    assert answer.headers["cache-control"] == "no-store"


async def test_the_operations_endpoints_are_not_in_the_document(
    http: AsyncTestClient[Litestar],
) -> None:
    paths = (await http.get("/schema/openapi.json")).json()["paths"]
    assert paths and not {"/health/live", "/health/ready", "/metrics"} & set(paths)
    # ... and the API is still POST only: GET elsewhere is the API's 405
    assert (await http.get("/prices")).status_code == 405


async def test_a_wrong_method_on_them_says_get(http: AsyncTestClient[Litestar]) -> None:
    answer = await http.post("/health/live")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET"
    assert answer.json()["message"] == "Method not allowed; this endpoint takes GET"


async def test_ready_lists_every_check(http: AsyncTestClient[Litestar]) -> None:
    status, body = await ready(http)
    assert status == 200 and body["status"] == "ok", body
    checks = body["checks"]
    assert set(checks) == {"database", "prices", *(f"node:{c.value}" for c in CONTRACT_CHAINS)}
    assert all(check["status"] == "ok" for check in checks.values()), checks
    assert 0 <= checks["prices"]["oldestAgeSeconds"] <= checks["prices"]["maxAgeSeconds"] == 900


@pytest.mark.parametrize("overrides", [{"storage": UnreachableStorage()}])
async def test_ready_is_503_when_the_database_is_down(http: AsyncTestClient[Litestar]) -> None:
    answer = await http.get("/health/ready")
    assert answer.status_code == 503 and SECRET not in answer.text
    body = answer.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == {
        "status": "failing",
        "error": "unreachable",
        "durationMs": body["checks"]["database"]["durationMs"],
    }
    assert body["checks"]["node:ETHEREUM"]["status"] == "ok"  # only what fails is failing
    assert (await http.get("/health/live")).status_code == 200  # alive all the same


@pytest.fixture
def down(container: Container) -> dict[Chain, Any]:
    """ETHEREUM's node answers with an error (whose text holds a key), TRON's and
    SOLANA's do not answer at all."""
    gateways: dict[Chain, Any] = dict(container.gateways())
    gateways[Chain.ETHEREUM] = NodeDown(Chain.ETHEREUM, RuntimeError(f"https://x/v3/{SECRET}"))
    gateways[Chain.TRON] = NodeDown(Chain.TRON)
    gateways[Chain.SOLANA] = NodeDown(Chain.SOLANA)
    container.gateways.override(gateways)
    return gateways


@pytest.mark.parametrize("operations", [OperationsSettings(health_timeout_seconds=0.3)])
async def test_ready_is_503_naming_the_chain_whose_node_is_down(
    down: dict[Chain, Any], http: AsyncTestClient[Litestar]
) -> None:
    started = time.monotonic()
    answer = await http.get("/health/ready")
    elapsed = time.monotonic() - started
    assert answer.status_code == 503 and SECRET not in answer.text
    checks = answer.json()["checks"]
    assert checks["node:ETHEREUM"]["status"] == "failing"
    assert checks["node:ETHEREUM"]["error"] == "RuntimeError"  # its class, never its text
    assert checks["node:TRON"]["error"] == checks["node:SOLANA"]["error"] == "timeout"
    assert checks["node:BITCOIN"]["status"] == checks["database"]["status"] == "ok"
    # Two checks waited their 0.3 s timeout at the same time, not one after the other.
    assert elapsed < 0.55, elapsed


@pytest.fixture
def unkept(container: Container) -> None:
    """Every readiness call probes again (a round is otherwise kept for a second)."""
    container.health.add_kwargs(min_interval_seconds=0.0)


async def test_ready_shows_the_price_age_and_stale_prices_are_not_ready(
    unkept: None, http: AsyncTestClient[Litestar], clock: ManualClock
) -> None:
    status, body = await ready(http)
    assert status == 200 and body["checks"]["prices"]["oldestAgeSeconds"] < 1
    clock.advance(seconds=600)
    status, body = await ready(http)
    assert status == 200 and 600 <= body["checks"]["prices"]["oldestAgeSeconds"] < 602
    clock.advance(seconds=301)  # 901 s since the last refresh: over the 900 s limit
    status, body = await ready(http)
    assert status == 503 and body["status"] == "unavailable"
    prices = body["checks"]["prices"]
    assert prices["status"] == "failing" and prices["error"] == "stale"
    assert 901 <= prices["oldestAgeSeconds"] < 903 and prices["maxAgeSeconds"] == 900


class CountedNode:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.checks = 0

    async def check(self) -> None:
        self.checks += 1
        await asyncio.sleep(0.05)


async def test_concurrent_probes_share_one_round(
    container: Container, http: AsyncTestClient[Litestar]
) -> None:
    node = CountedNode(Chain.ETHEREUM)
    container.gateways.override({Chain.ETHEREUM: node})
    answers = await asyncio.gather(*(http.get("/health/ready") for _ in range(5)))
    assert [a.status_code for a in answers] == [200] * 5
    assert set(answers[0].json()["checks"]) == {"database", "node:ETHEREUM", "prices"}
    assert node.checks == 1  # an open endpoint cannot be used to flood the nodes
    assert (await http.get("/health/ready")).status_code == 200
    assert node.checks == 1  # ... nor right after: the round is kept for a second


class NoWorker:
    """The jobs engine's monitor of a deployment whose worker is not running."""

    async def check(self) -> None:
        raise CheckFailed("no worker: no `walletcore worker` sent a heartbeat in the last 30 s")


async def test_ready_shows_a_missing_worker_as_a_warning_that_keeps_it_ready(
    container: Container, http: AsyncTestClient[Litestar]
) -> None:
    """Readiness says why (the monitor's reason, shown as written), and fails only on what
    a dead worker leads to (no prices, stale prices), never on the worker alone."""
    container.jobs_monitor.override(providers.Object(NoWorker()))
    container.health.reset()
    status, body = await ready(http)
    assert status == 200 and body["status"] == "ok"
    assert body["checks"]["jobs"] == {
        "status": "warning",
        "error": "no worker: no `walletcore worker` sent a heartbeat in the last 30 s",
        "durationMs": body["checks"]["jobs"]["durationMs"],
    }


def test_a_failing_check_is_named_by_its_class_unless_it_says_why() -> None:
    assert failure_name(RuntimeError(f"https://x/v3/{SECRET}")) == "RuntimeError"
    assert failure_name(CheckFailed("wrong chain: the node serves chain id 5")) == (
        "wrong chain: the node serves chain id 5"
    )
