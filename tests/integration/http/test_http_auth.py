"""`/auth` and the bearer token on every other endpoint (expiry on a manual clock)."""

from __future__ import annotations

import re

import pytest
from http_support import Api, assert_error, assert_ok
from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container

TOKEN_PATHS = [
    "/prices",
    "/config",
    "/sell",
    "/order",
    "/trade/approve",
    "/trade/cancel",
    "/trade",
    "/trades",
    "/create",
    "/extend",
    "/addresses",
    "/platform/addresses",
]


async def test_auth_answers_a_token_and_its_expiry(api: Api, clock: ManualClock) -> None:
    response = await api.http.post(
        "/auth", headers={"x-client-id": api.client_id, "x-api-key": api.issued.api_key}
    )
    result = assert_ok(response)
    assert set(result) == {"token", "expiresAt"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", result["expiresAt"])
    assert result["expiresAt"] == "2026-01-01T12:15:30.000Z"  # 15 minutes
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-client-id": "0" * 24, "x-api-key": "wck_nope"},
        {"x-api-key": "wck_nope"},
    ],
)
async def test_wrong_credentials_are_401_invalid_credentials(
    api: Api, headers: dict[str, str]
) -> None:
    assert_error(await api.http.post("/auth", headers=headers), 401, "Invalid credentials")


async def test_a_wrong_key_for_a_real_client_is_401(api: Api) -> None:
    headers = {"x-client-id": api.client_id, "x-api-key": api.issued.api_key + "x"}
    assert_error(await api.http.post("/auth", headers=headers), 401, "Invalid credentials")


@pytest.mark.parametrize("path", TOKEN_PATHS)
async def test_every_other_endpoint_needs_the_token(api: Api, path: str) -> None:
    assert_error(await api.http.post(path, json={}), 401, "Missing or expired token")


@pytest.mark.parametrize(
    "value", ["Bearer", "Bearer nonsense", "Basic abc", "bearer x.y.z", "Token abc"]
)
async def test_a_malformed_or_forged_token_is_401(api: Api, value: str) -> None:
    response = await api.http.post("/prices", headers={"Authorization": value})
    assert_error(response, 401, "Missing or expired token")


async def test_a_tampered_token_is_401(api: Api) -> None:
    head, body, signature = api.token.split(".")
    forged = f"{head}.{body}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BB'}"
    response = await api.http.post("/prices", headers={"Authorization": f"Bearer {forged}"})
    assert_error(response, 401, "Missing or expired token")


async def test_401_comes_before_body_validation(api: Api) -> None:
    response = await api.http.post("/trade", content=b"{not json")
    assert_error(response, 401, "Missing or expired token")


async def test_token_lapses_after_15_minutes(api: Api, clock: ManualClock) -> None:
    clock.advance(minutes=14, seconds=59)
    assert_ok(await api.post("/prices"))
    clock.advance(seconds=1)
    assert_error(await api.post("/prices"), 401, "Missing or expired token")


async def test_rotating_the_key_stops_old_tokens_and_the_old_key(
    api: Api, container: Container
) -> None:
    rotated = await container.auth().rotate_key(api.client_id)
    assert_error(await api.post("/config"), 401, "Missing or expired token")
    old = {"x-client-id": api.client_id, "x-api-key": api.issued.api_key}
    assert_error(await api.http.post("/auth", headers=old), 401, "Invalid credentials")
    new = {"x-client-id": api.client_id, "x-api-key": rotated.api_key}
    assert_ok(await api.http.post("/auth", headers=new))


async def test_a_disabled_client_cannot_call_or_sign_in(api: Api, container: Container) -> None:
    await container.auth().disable_client(api.client_id)
    assert_error(await api.post("/prices"), 401, "Missing or expired token")
    headers = {"x-client-id": api.client_id, "x-api-key": api.issued.api_key}
    assert_error(await api.http.post("/auth", headers=headers), 401, "Invalid credentials")


async def test_auth_ignores_a_body(http: AsyncTestClient[Litestar], api: Api) -> None:
    headers = {"x-client-id": api.client_id, "x-api-key": api.issued.api_key}
    assert_ok(await http.post("/auth", headers=headers, json={"anything": 1}))
