"""`GET /metrics`: requests by route template and status, latency, refused `/auth`, price
age, venue and node errors, sends, nonce lease waits; an optional operator token."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from pydantic import SecretStr

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import Chain
from walletcore.domain.errors import TransferRejected
from walletcore.domain.ids import new_id
from walletcore.ports import SignedTransfer
from walletcore_litestar.operations import OperationsSettings

pytest.register_assert_rewrite("http_support")

from http_support import Api, assert_error, assert_ok
from operations_support import samples, value

TOKEN = "metrics-token-0123456789"


async def scrape(http: AsyncTestClient[Litestar], **headers: str) -> dict[Any, float]:
    answer = await http.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return samples(answer.text)


async def test_requests_are_counted_by_route_template_and_status(
    api: Api, http: AsyncTestClient[Litestar]
) -> None:
    for _ in range(3):
        assert_ok(await api.post("/prices"))
    unknown = new_id()
    assert_error(await api.post("/trade", {"userId": unknown, "tradeId": new_id()}), 404)
    assert (await http.post(f"/trade/{unknown}")).status_code == 404  # no such route
    assert (await http.get("/health/live")).status_code == 200

    answer = await http.get("/metrics")
    found = samples(answer.text)
    requests = "walletcore_http_requests_total"
    assert value(found, requests, method="POST", route="/prices", status="200") == 3
    assert value(found, requests, method="POST", route="/trade", status="404") == 1
    assert value(found, requests, method="POST", route="/auth", status="200") == 1
    assert value(found, requests, method="POST", route="unmatched", status="404") == 1
    assert value(found, requests, method="GET", route="/health/live", status="200") == 1
    assert unknown not in answer.text  # never a raw path, never an id

    latency = "walletcore_http_request_duration_seconds"
    prices = {"method": "POST", "route": "/prices", "status": "200"}
    assert value(found, f"{latency}_count", **prices) == 3
    assert value(found, f"{latency}_bucket", le="+Inf", **prices) == 3
    assert value(found, f"{latency}_bucket", le="30.0", **prices) == 3
    assert value(found, f"{latency}_sum", **prices) > 0


async def test_a_rejected_approve_counts_a_venue_error(
    api: Api, http: AsyncTestClient[Litestar]
) -> None:
    user_id = await api.new_user()
    before = await scrape(http)
    assert value(before, "walletcore_venue_errors_total", operation="execute", kind="rejected") == 0
    body = {"userId": user_id, "assetId": 1, "cryptoAmount": "502"}  # the sandbox rejects 502
    trade = assert_ok(await api.post("/sell", body))
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert_error(await api.post("/trade/approve", ids), 502)
    timeout = {"userId": user_id, "assetId": 1, "cryptoAmount": "504"}  # and times out on 504
    trade = assert_ok(await api.post("/sell", timeout))
    assert_error(await api.post("/trade/approve", {**ids, "tradeId": trade["tradeId"]}), 504)

    found = await scrape(http)
    errors = "walletcore_venue_errors_total"
    assert value(found, errors, operation="execute", kind="rejected") == 1
    assert value(found, errors, operation="execute", kind="timeout") == 1
    assert value(found, errors, operation="execute", kind="unavailable") == 0
    approve = {"method": "POST", "route": "/trade/approve"}
    assert value(found, "walletcore_http_requests_total", status="502", **approve) == 1


async def test_node_errors_and_broadcasts_are_counted_per_chain(
    http: AsyncTestClient[Litestar], container: Container
) -> None:
    gateway = container.gateways()[Chain.ETHEREUM]  # the container's own, measured in place
    with pytest.raises(TransferRejected):
        await gateway.broadcast(SignedTransfer(b"not a transaction", "0x" + "00" * 32))
    found = await scrape(http)
    node = {"chain": "ETHEREUM", "operation": "broadcast", "kind": "rejected"}
    assert value(found, "walletcore_node_errors_total", **node) == 1
    broadcasts = "walletcore_send_broadcasts_total"
    assert value(found, broadcasts, chain="ETHEREUM", outcome="refused") == 1
    assert value(found, broadcasts, chain="ETHEREUM", outcome="accepted") == 0


async def test_refused_auth_is_counted_by_reason_never_by_id(
    api: Api, http: AsyncTestClient[Litestar], container: Container
) -> None:
    before = await scrape(http)
    failures = "walletcore_auth_failures_total"
    for reason in ("malformed", "unknown_client", "wrong_key", "disabled"):
        assert value(before, failures, reason=reason) == 0  # shown before the first
    unknown = new_id()
    other = await container.auth().create_client("Disabled Pay")
    await container.auth().disable_client(other.client.client_id)
    for client_id, key in (
        (unknown, api.issued.api_key),
        ("not-an-id", api.issued.api_key),
        (api.client_id, "wck_wrong"),
        (api.client_id, "wck_wrong"),
        (other.client.client_id, other.api_key),
    ):
        answer = await http.post("/auth", headers={"x-client-id": client_id, "x-api-key": key})
        assert_error(answer, 401, "Invalid credentials")
    answer = await http.get("/metrics")
    found = samples(answer.text)
    assert value(found, failures, reason="unknown_client") == 1
    assert value(found, failures, reason="malformed") == 1
    assert value(found, failures, reason="wrong_key") == 2
    assert value(found, failures, reason="disabled") == 1
    assert unknown not in answer.text and api.client_id not in answer.text


async def test_nonce_lease_waits_are_measured(
    http: AsyncTestClient[Litestar], container: Container
) -> None:
    leases = container.nonce_leases()
    lease = await leases.acquire("eip155:1", "0x" + "ab" * 20)
    await lease.release(None)
    found = await scrape(http)
    waits = "walletcore_nonce_lease_wait_seconds"
    assert value(found, f"{waits}_count", sequence="eip155:1") == 1
    assert value(found, f"{waits}_bucket", sequence="eip155:1", le="+Inf") == 1


async def test_price_ages_are_shown_per_symbol(
    http: AsyncTestClient[Litestar], clock: ManualClock
) -> None:
    clock.advance(seconds=42)
    found = await scrape(http)
    assert 42 <= value(found, "walletcore_price_age_seconds", symbol="BTC") < 43
    assert 42 <= value(found, "walletcore_price_age_seconds", symbol="USDT") < 43
    assert value(found, "walletcore_price_max_age_seconds") == 900
    assert value(found, "walletcore_worker_up") == 1


@pytest.mark.parametrize("operations", [OperationsSettings(metrics_token=SecretStr(TOKEN))])
async def test_a_metrics_token_guards_the_metrics(http: AsyncTestClient[Litestar]) -> None:
    refused = await http.get("/metrics")
    assert refused.status_code == 401 and "walletcore_" not in refused.text
    assert refused.json()["message"] == "Missing or expired token"
    wrong = await http.get("/metrics", headers={"Authorization": "Bearer " + TOKEN[:-1]})
    assert wrong.status_code == 401
    found = await scrape(http, Authorization=f"Bearer {TOKEN}")
    assert value(found, "walletcore_worker_up") == 1
    assert (await http.get("/health/ready")).status_code == 200  # probes need no token


async def test_pending_sends_are_counted_from_the_storage_at_each_scrape(
    api: Api, http: AsyncTestClient[Litestar], container: Container, clock: ManualClock
) -> None:
    """Any process answers it (a worker elsewhere follows the sends): two sends accepted by
    the network and still pending on chain, then one of them final."""
    from walletcore.domain.sends import ChainStatus
    from walletcore.testing import autocommit

    db = autocommit(container.storage())
    now = clock.now()
    for request_id in ("p-1", "p-2"):
        started = await db.sends.begin(api.client_id, request_id, "fp-" + request_id, now)
        signed = started.signed(b"raw", "0x" + request_id, now)
        assert await db.sends.advance(started, signed)
        sent = signed.broadcast(now)
        assert await db.sends.advance(signed, sent)
        finished = sent.finish({"txHash": "0x" + request_id, "status": "pending"}, now, follow=True)
        assert await db.sends.advance(sent, finished)
    assert value(await scrape(http), "walletcore_sends_pending") == 2
    pending = await db.sends.get(api.client_id, "p-1")
    assert await db.sends.track(pending, pending.tracked(ChainStatus.SUCCESS, now))
    assert value(await scrape(http), "walletcore_sends_pending") == 1
