"""Withdrawal policies over HTTP (docs/policies.md): a held send answers `202` with its
approval, again on a retry, and is signed once by the first retry after operators approved
it; a refused one is the `403` envelope naming the rule, nothing sent; `POST /policy` and
`POST /approvals` show the client its own policy and held sends, never another client's
nor the operators' names. Every response is held to the served OpenAPI document, and the
shapes are checked against it here too."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import (
    DOCUMENT_PATH,
    PASSWORD,
    Api,
    assert_error,
    assert_ok,
    served_document,
    sign_in,
)

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import Chain
from walletcore.domain.ids import new_id
from walletcore.testing import autocommit
from walletcore_sandbox.faucet import fund

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
HELD_KEYS = {"txHash", "status", "approvalId", "rule", "approvals", "required", "expiresAt"}
APPROVAL_KEYS = {
    "id",
    "requestId",
    "status",
    "rule",
    "required",
    "approvals",
    "assetId",
    "amount",
    "recipient",
    "createdAt",
    "expiresAt",
    "decidedAt",
}


def big_needs(approvals: int, wallet: str = "user") -> dict[str, Any]:
    """Sends of more than 0.5 ETH wait for `approvals` operators; the rest are allowed."""
    return {
        "default": "allow",
        "rules": [
            {
                "name": "big-eth",
                "wallet": wallet,
                "action": "require_approval",
                "approvals": approvals,
                "over": {"amount": "0.5", "assetId": 2},
            }
        ],
    }


async def funded_user(api: Api, amount: str = "2") -> str:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    await give(api.container, created["addresses"]["ETHEREUM"], amount)
    return str(created["userId"])


async def give(container: Container, address: str, amount: str) -> None:
    await fund(
        container.settings(),
        container.gateways(),
        container.catalog(),
        chain="ETHEREUM",
        address=address,
        asset_id=2,
        amount=amount,
    )


def send_body(user: str, amount: str) -> dict[str, Any]:
    return {
        "userId": user,
        "assetId": 2,
        "recipient": RECIPIENT,
        "amount": amount,
        "password": PASSWORD,
    }


def assert_held(response: Any) -> dict[str, Any]:
    """The `202` envelope of a held send."""
    assert response.status_code == 202, response.text
    body = response.json()
    assert set(body) == {"result", "requestId"}, body
    assert body["requestId"] == response.headers["x-request-id"]
    result: dict[str, Any] = body["result"]
    assert set(result) == HELD_KEYS
    assert result["txHash"] is None and result["status"] == "awaiting_approval"
    return result


async def document_check(api: Api, schema: str, value: Any) -> None:
    """`value` is valid under the served document's component `schema`."""
    judge = served_document((await api.http.get(DOCUMENT_PATH)).content)
    validator = judge.validator({"$ref": f"#/components/schemas/{schema}"})
    assert validator.is_valid(value), list(validator.iter_errors(value))


async def signed_sends(container: Container, client_id: str) -> list[str]:
    """The tx hashes the audit log says were signed for the client's sends."""
    entries = await autocommit(container.storage()).audit.newest(1000)
    return [
        str(e.target)
        for e in entries
        if e.client_id == client_id and e.action == "wallet.send" and e.detail == "signed"
    ]


async def test_a_held_send_is_202_until_approved_then_signed_once(
    api: Api, container: Container
) -> None:
    policies = container.policies()
    await policies.set_policy(api.client_id, big_needs(1), set_by="test")
    user = await funded_user(api)
    body = send_body(user, "0.6")

    held = assert_held(await api.post("/send", body, X_Request_Id="big-1"))
    assert (held["rule"], held["approvals"], held["required"]) == ("big-eth", 0, 1)
    await document_check(api, "HeldResult", held)
    # a retry while it waits: the same approval, still nothing signed
    again = assert_held(await api.post("/send", body, X_Request_Id="big-1"))
    assert again == held
    assert await signed_sends(container, api.client_id) == []
    # a small send passes the rule
    small = assert_ok(await api.post("/send", send_body(user, "0.1"), X_Request_Id="small-1"))
    assert small["txHash"]

    (shown,) = assert_ok(await api.post("/approvals", {}))
    assert set(shown) == APPROVAL_KEYS
    assert shown["id"] == held["approvalId"] and shown["requestId"] == "big-1"
    assert (shown["status"], shown["approvals"], shown["required"]) == ("pending", 0, 1)
    assert (shown["assetId"], shown["amount"], shown["recipient"]) == (2, "0.6", RECIPIENT)
    assert shown["expiresAt"] == held["expiresAt"] and shown["decidedAt"] is None

    operator, _ = await policies.add_operator("alice")
    await policies.approve(held["approvalId"], operator)
    sent = assert_ok(await api.post("/send", body, X_Request_Id="big-1"))
    assert set(sent) == {"txHash", "status", "fee", "feePayer"} and sent["txHash"]
    assert assert_ok(await api.post("/send", body, X_Request_Id="big-1")) == sent
    assert sorted(await signed_sends(container, api.client_id)) == sorted(
        [small["txHash"], sent["txHash"]]
    )
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 2}))
    assert [r["hash"] for r in rows if r["type"] == "send"].count(sent["txHash"]) == 1

    (approved,) = assert_ok(await api.post("/approvals", {"status": "approved"}))
    assert (approved["status"], approved["approvals"]) == ("approved", 1)
    assert approved["decidedAt"] is not None
    assert "alice" not in str(approved)
    assert assert_ok(await api.post("/approvals", {"status": "pending"})) == []
    # the feed says so too, in shapes the document describes
    events = assert_ok(await api.post("/events", {"limit": 1000}))["events"]
    types = [e["type"] for e in events]
    assert types.index("send.awaiting_approval") < types.index("send.approved")


async def test_a_held_platform_send_answers_202_too(api: Api, container: Container) -> None:
    addresses = await container.wallets().provision_platform(api.client_id)
    await give(container, addresses[Chain.ETHEREUM], "2")
    await container.policies().set_policy(
        api.client_id, big_needs(2, wallet="platform"), set_by="test"
    )
    body = {"assetId": 2, "recipient": RECIPIENT, "amount": "0.75"}
    held = assert_held(await api.post("/platform/send", body, X_Request_Id="p-1"))
    assert (held["rule"], held["required"]) == ("big-eth", 2)
    assert assert_ok(await api.post("/platform/balance", {"assetId": 2})) == "2"


async def test_a_deny_rule_is_a_403_naming_the_rule(api: Api, container: Container) -> None:
    policy = {
        "default": "allow",
        "rules": [
            {
                "name": "max-eth",
                "wallet": "user",
                "action": "deny",
                "over": {"amount": "0.5", "assetId": 2},
            }
        ],
    }
    await container.policies().set_policy(api.client_id, policy, set_by="test")
    user = await funded_user(api)
    refused = assert_error(await api.post("/send", send_body(user, "0.6"), X_Request_Id="d-1"), 403)
    assert refused["message"].startswith("Transfer refused by withdrawal policy rule max-eth:")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})) == "2"
    assert await signed_sends(container, api.client_id) == []
    assert assert_ok(await api.post("/approvals", {})) == []


async def test_the_client_reads_its_policy_and_allowlist(
    api: Api, container: Container, clock: ManualClock
) -> None:
    empty = assert_ok(await api.post("/policy"))
    assert empty == {"inForce": None, "pending": [], "allowlist": []}
    policies = container.policies()
    await policies.set_policy(api.client_id, big_needs(1), set_by="test")
    clock.advance(60)
    looser = {**big_needs(1), "changeDelaySeconds": 3600}
    await policies.set_policy(api.client_id, looser, set_by="test")
    await policies.allow_address(
        api.client_id, Chain.ETHEREUM, RECIPIENT, "Cold storage", asset_id=2, by="test"
    )
    shown = assert_ok(await api.post("/policy", {}))
    await document_check(api, "PolicyView", shown)
    assert shown["inForce"]["version"] == 1
    assert shown["inForce"]["policy"]["rules"][0]["name"] == "big-eth"
    (pending,) = shown["pending"]
    assert pending["version"] == 2 and pending["policy"]["changeDelaySeconds"] == 3600
    assert pending["effectiveAt"] > pending["setAt"]
    (entry,) = shown["allowlist"]
    assert (entry["chain"], entry["address"], entry["assetId"], entry["label"]) == (
        "ETHEREUM",
        RECIPIENT,
        2,
        "Cold storage",
    )
    assert entry["usableAt"] > entry["addedAt"]

    # the api client's own endpoints: no user, no body
    for path in ("/policy", "/approvals"):
        assert_error(
            await api.post(path, {}, X_USER_ID=new_id()),
            400,
            "X-USER-ID is not accepted here: this endpoint is the api client's, not a user's",
        )
        assert_error(await api.http.post(path, json={}), 401, "Missing or expired token")
    assert_error(await api.post("/policy", {"clientId": "someone else"}), 400)


async def test_another_clients_approvals_are_never_shown(api: Api, container: Container) -> None:
    other = await sign_in(api.http, container, name="Other")
    policies = container.policies()
    for client in (api, other):
        await policies.set_policy(client.client_id, big_needs(1), set_by="test")
    mine = assert_held(
        await api.post("/send", send_body(await funded_user(api), "0.6"), X_Request_Id="r-1")
    )
    theirs = assert_held(
        await other.post("/send", send_body(await funded_user(other), "0.7"), X_Request_Id="r-1")
    )
    assert [a["id"] for a in assert_ok(await api.post("/approvals", {}))] == [mine["approvalId"]]
    listed = assert_ok(await other.post("/approvals", {"limit": 10}))
    assert [a["id"] for a in listed] == [theirs["approvalId"]]
    await document_check(api, "ApprovalView", listed[0])
    assert assert_ok(await other.post("/policy"))["inForce"]["version"] == 1


async def test_an_expired_approval_is_listed_as_expired(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await container.policies().set_policy(
        api.client_id, {**big_needs(1), "approvalTtlSeconds": 60}, set_by="test"
    )
    body = send_body(await funded_user(api), "0.6")
    held = assert_held(await api.post("/send", body, X_Request_Id="slow"))
    clock.advance(61)
    (expired,) = assert_ok(await api.post("/approvals", {"status": "expired"}))
    assert (expired["id"], expired["status"]) == (held["approvalId"], "expired")
    assert assert_ok(await api.post("/approvals", {"status": "pending"})) == []
    refused = assert_error(await api.post("/send", body, X_Request_Id="slow"), 403)
    assert "big-eth" in refused["message"] and "expired" in refused["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"status": "waiting"},
        {"status": 1},
        {"limit": 0},
        {"limit": 1001},
        {"limit": "ten"},
        {"userId": "5f0c6e2a9b1d4c3e8f7a6b5c"},
    ],
)
async def test_bad_approval_filters_are_400(api: Api, body: dict[str, Any]) -> None:
    assert_error(await api.post("/approvals", body), 400)


async def test_the_paths_and_the_held_answer_are_documented(api: Api) -> None:
    document = (await api.http.get(DOCUMENT_PATH)).json()
    for path in ("/send", "/platform/send"):
        responses = document["paths"][path]["post"]["responses"]
        held = responses["202"]["content"]["application/json"]["schema"]["$ref"]
        assert held == "#/components/schemas/HeldEnvelope"
        assert "withdrawal policy" in responses["403"]["description"]
        assert "withdrawal policy" in responses["503"]["description"]
        assert "202" in document["paths"][path]["post"]["description"]
    result = document["components"]["schemas"]["HeldResult"]
    assert result["properties"]["txHash"]["type"] == "null"
    assert sorted(result["required"]) == sorted(HELD_KEYS)
    assert set(document["components"]["schemas"]["ApprovalView"]["properties"]) == APPROVAL_KEYS
    for path in ("/policy", "/approvals"):
        operation = document["paths"][path]["post"]
        assert {"200", "400", "401"} <= set(operation["responses"])
        assert "X-USER-ID" not in {p["name"] for p in operation["parameters"]}
