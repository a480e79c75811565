"""Withdrawal policies end to end on a served sandbox (SQLite): the operator sets a client's
policy (`walletcore policies set`) and adds operators; a large `/send` answers `202` with
its approval, again on a retry; two operators approve it with `walletcore approvals
approve` (their keys from WALLETCORE_OPERATOR_KEY); the retry then signs and sends it once
(`200` with its txHash, the same on a further retry); `/approvals` and `/policy` show the
client what happened; a send over the hard limit is the `403` naming the rule. Every
response is held to the served OpenAPI document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from http_support import (
    PASSWORD,
    assert_error,
    assert_ok,
    judge_responses_sync,
    served_cli,
    served_home,
)
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_litestar import create_app

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
POLICY = {
    "default": "allow",
    "rules": [
        {
            "name": "max-eth",
            "wallet": "user",
            "action": "deny",
            "over": {"amount": "1.5", "assetId": 2},
        },
        {
            "name": "big-needs-two",
            "wallet": "user",
            "action": "require_approval",
            "approvals": 2,
            "over": {"amount": "0.5", "assetId": 2},
        },
    ],
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return served_home(tmp_path, monkeypatch)


def test_a_held_send_is_approved_by_two_operators_and_sent_once(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(create_container(Settings(home=home, repo="sql")))
    with TestClient(app) as client:
        http = judge_responses_sync(client)
        created = served_cli(capsys, "clients", "create", "--name", "Acme", "--assets", "2")
        client_id = created["clientId"]
        document = tmp_path / "policy.json"
        document.write_text(json.dumps(POLICY))
        version = served_cli(capsys, "policies", "set", client_id, str(document))
        assert version["version"] == 1
        keys = {n: served_cli(capsys, "operators", "add", n)["key"] for n in ("alice", "bob")}

        headers = {"x-client-id": client_id, "x-api-key": created["apiKey"]}
        token = assert_ok(http.post("/auth", headers=headers))["token"]
        auth = {"Authorization": f"Bearer {token}"}
        wallet = assert_ok(http.post("/create", json={"password": PASSWORD}, headers=auth))
        user = wallet["userId"]
        served_cli(
            capsys,
            "sandbox",
            "fund",
            "--chain",
            "ETHEREUM",
            "--address",
            wallet["addresses"]["ETHEREUM"],
            "--asset",
            "2",
            "--amount",
            "3",
        )

        def send(amount: str, request_id: str) -> Any:
            body = {
                "userId": user,
                "assetId": 2,
                "recipient": RECIPIENT,
                "amount": amount,
                "password": PASSWORD,
            }
            return http.post("/send", json=body, headers={**auth, "X-Request-Id": request_id})

        first = send("0.8", "big-1")
        assert first.status_code == 202, first.text
        held = first.json()["result"]
        assert (held["status"], held["txHash"], held["rule"]) == (
            "awaiting_approval",
            None,
            "big-needs-two",
        )
        assert (held["approvals"], held["required"]) == (0, 2)
        assert send("0.8", "big-1").json()["result"] == held

        refused = assert_error(send("2", "too-big"), 403)
        assert refused["message"].startswith("Transfer refused by withdrawal policy rule max-eth")

        approval = held["approvalId"]
        monkeypatch.setenv("WALLETCORE_OPERATOR_KEY", keys["alice"])
        once = served_cli(capsys, "approvals", "approve", approval, "--operator", "alice")
        assert once["status"] == "pending"
        assert send("0.8", "big-1").status_code == 202  # one of two: still held
        monkeypatch.setenv("WALLETCORE_OPERATOR_KEY", keys["bob"])
        done = served_cli(capsys, "approvals", "approve", approval, "--operator", "bob")
        assert (done["status"], done["approvers"]) == ("approved", ["alice", "bob"])

        sent = assert_ok(send("0.8", "big-1"))
        assert sent["txHash"] and sent["status"] == "pending"
        assert assert_ok(send("0.8", "big-1")) == sent
        rows = assert_ok(
            http.post("/transactions", json={"userId": user, "assetId": 2}, headers=auth)
        )
        assert [r["hash"] for r in rows if r["type"] == "send"] == [sent["txHash"]]

        (shown,) = assert_ok(http.post("/approvals", json={}, headers=auth))
        assert (shown["id"], shown["status"], shown["approvals"]) == (approval, "approved", 2)
        assert "alice" not in json.dumps(shown) and "bob" not in json.dumps(shown)
        policy = assert_ok(http.post("/policy", headers=auth))
        assert policy["inForce"]["version"] == 1 and policy["pending"] == []
        assert [r["name"] for r in policy["inForce"]["policy"]["rules"]] == [
            "max-eth",
            "big-needs-two",
        ]
