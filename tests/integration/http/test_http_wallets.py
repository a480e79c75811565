"""`/create`, `/extend`, `/addresses` and `/platform/addresses`; no secret in any log."""

from __future__ import annotations

import logging

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, sign_in

from walletcore.container import Container
from walletcore.domain.ids import new_id


async def create(api: Api, password: str = PASSWORD) -> dict[str, object]:
    return assert_ok(await api.post("/create", {"password": password}))  # type: ignore[no-any-return]


async def test_create_answers_user_addresses_and_the_seed_phrase_once(api: Api) -> None:
    response = await api.post("/create", {"password": PASSWORD})
    result = assert_ok(response)
    assert set(result) == {"userId", "addresses", "mnemonic"}
    assert len(result["userId"]) == 24
    assert list(result["addresses"]) == ["BITCOIN", "ETHEREUM", "BSC", "TRON", "POLYGON", "SOLANA"]
    assert len(result["mnemonic"].split()) == 24
    assert response.headers["cache-control"] == "no-store"
    again = assert_ok(await api.post("/addresses", {"userId": result["userId"]}))
    assert "mnemonic" not in again and again["addresses"] == result["addresses"]


async def test_create_limits_addresses_to_enabled_chains(api: Api, container: Container) -> None:
    narrow = await sign_in(api.http, container, name="Narrow", assets=[1, 41])
    result = await create(narrow)
    assert list(result["addresses"]) == ["BITCOIN", "TRON"]  # type: ignore[arg-type]


@pytest.mark.parametrize("password", ["short", "", None, 12345678])
async def test_create_refuses_a_bad_password_with_400(api: Api, password: object) -> None:
    assert_error(await api.post("/create", {"password": password}), 400)


async def test_extend_answers_user_and_addresses(api: Api) -> None:
    created = await create(api)
    result = assert_ok(
        await api.post("/extend", {"userId": str(created["userId"]).upper(), "password": PASSWORD})
    )
    assert result == {"userId": created["userId"], "addresses": created["addresses"]}


async def test_extend_with_a_wrong_password_is_401(api: Api) -> None:
    created = await create(api)
    response = await api.post(
        "/extend", {"userId": created["userId"], "password": "wrong password"}
    )
    assert_error(response, 401, "Invalid credentials")


async def test_extend_and_addresses_take_the_user_header(api: Api) -> None:
    created = await create(api)
    uid = str(created["userId"])
    assert assert_ok(await api.post("/addresses", {}, X_USER_ID=uid))["userId"] == uid
    body = {"userId": new_id(), "password": PASSWORD}
    assert assert_ok(await api.post("/extend", body, X_USER_ID=uid))["userId"] == uid


async def test_unknown_user_is_404(api: Api) -> None:
    assert_error(await api.post("/addresses", {"userId": new_id()}), 404, "User not found")
    body = {"userId": new_id(), "password": PASSWORD}
    assert_error(await api.post("/extend", body), 404, "User not found")


async def test_bad_user_id_is_400(api: Api) -> None:
    assert_error(await api.post("/addresses", {"userId": "xyz"}), 400)
    assert_error(await api.post("/addresses", {}), 400, "userId is required")


async def test_platform_addresses_404_until_provisioned(api: Api, container: Container) -> None:
    assert_error(await api.post("/platform/addresses"), 404)
    provisioned = await container.wallets().provision_platform(api.client_id)
    result = assert_ok(await api.post("/platform/addresses", {}))
    assert result == {chain.value: address for chain, address in provisioned.items()}
    assert assert_ok(await api.post("/platform/addresses")) == result


async def test_platform_refuses_the_user_header(api: Api, container: Container) -> None:
    await container.wallets().provision_platform(api.client_id)
    response = await api.post("/platform/addresses", X_USER_ID=new_id())
    assert_error(response, 400, "X-USER-ID is not accepted on platform endpoints")


async def test_platform_checks_the_token_before_the_user_header(api: Api) -> None:
    response = await api.http.post("/platform/addresses", headers={"X-USER-ID": new_id()})
    assert_error(response, 401, "Missing or expired token")


async def test_platform_refuses_a_body_with_fields(api: Api) -> None:
    assert_error(await api.post("/platform/addresses", {"userId": new_id()}), 400)


async def test_logs_carry_no_secret(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    created = await create(api)
    await api.post("/extend", {"userId": created["userId"], "password": PASSWORD})
    await api.post("/extend", {"userId": created["userId"], "password": "wrong password"})
    headers = {"x-client-id": api.client_id, "x-api-key": api.issued.api_key}
    await api.http.post("/auth", headers=headers)
    text = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (
        PASSWORD,
        "wrong password",
        str(created["mnemonic"]),
        api.token,
        api.issued.api_key,
    ):
        assert secret not in text
    for word in str(created["mnemonic"]).split()[:3]:
        assert f" {word} " not in text
    lines = [r.getMessage() for r in caplog.records if r.name == "walletcore.http"]
    assert any(
        line.startswith("method=POST path=/create status=200 requestId=") and "durationMs=" in line
        for line in lines
    )
