"""`POST /webhooks/deliveries`: the client's own delivery log, newest first, of one event
when asked, never another client's; bad fields answered as documented; every response held
to the served OpenAPI document, which documents the path."""

from __future__ import annotations

from datetime import timedelta

from http_support import Api, assert_error, assert_ok

from walletcore.container import Container
from walletcore.domain.webhooks import AttemptResult, DeliveryAttempt, DeliveryError
from walletcore.testing import autocommit


async def _log(container: Container, client_id: str) -> None:
    now = container.clock().now()
    attempts = [
        DeliveryAttempt(
            client_id,
            "evt_0_1",
            1,
            now,
            None,
            DeliveryError.CONNECT,
            0.004,
            AttemptResult.RETRYING,
            now + timedelta(seconds=5),
        ),
        DeliveryAttempt(
            client_id,
            "evt_0_1",
            2,
            now + timedelta(seconds=5),
            200,
            None,
            0.031,
            AttemptResult.DELIVERED,
        ),
        DeliveryAttempt(
            client_id,
            "evt_0_2",
            1,
            now + timedelta(seconds=6),
            410,
            None,
            0.02,
            AttemptResult.DISABLED,
        ),
    ]
    for attempt in attempts:
        await autocommit(container.storage()).webhooks.record(attempt)


async def test_the_client_reads_its_delivery_log_newest_first(
    api: Api, container: Container
) -> None:
    await _log(container, api.client_id)
    found = assert_ok(await api.post("/webhooks/deliveries", {}))
    assert [(d["eventId"], d["attempt"], d["result"]) for d in found] == [
        ("evt_0_2", 1, "disabled"),
        ("evt_0_1", 2, "delivered"),
        ("evt_0_1", 1, "retrying"),
    ]
    first = found[-1]
    assert first["status"] is None and first["error"] == "connect"
    assert first["nextAttemptAt"].endswith("Z") and first["seconds"] == 0.004
    assert found[0]["status"] == 410 and found[0]["error"] is None
    one = assert_ok(await api.post("/webhooks/deliveries", {"eventId": "evt_0_1", "limit": 1}))
    assert [(d["eventId"], d["attempt"]) for d in one] == [("evt_0_1", 2)]


async def test_another_clients_log_is_not_shown(api: Api, container: Container) -> None:
    from http_support import sign_in

    await _log(container, api.client_id)
    other = await sign_in(api.http, container, name="Other")
    assert assert_ok(await other.post("/webhooks/deliveries", {})) == []


async def test_bad_fields_are_400(api: Api) -> None:
    for body in ({"limit": 0}, {"limit": 1001}, {"eventId": "evt_x"}, {"unknown": 1}):
        assert_error(await api.post("/webhooks/deliveries", body), 400)
    assert_error(await api.http.post("/webhooks/deliveries", json={}), 401)


async def test_the_path_is_documented(api: Api) -> None:
    document = (await api.http.get("/schema/openapi.json")).json()
    operation = document["paths"]["/webhooks/deliveries"]["post"]
    assert {"200", "400", "401"} <= set(operation["responses"])
    assert "webhook-id" in operation["description"]
