"""`POST /events` and `POST /deposits` on a served sandbox (SQLite, in-process jobs): a
`walletcore sandbox fund` is a deposit the scan finds, seen and confirmed on the feed; a
send is on it from pending to success; the cursor pages the feed exactly; a user filter,
another client's user, a bad cursor and a bad limit answer as documented; every response is
held to the served OpenAPI document."""

from __future__ import annotations

import time
from decimal import Decimal
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
    until,
)
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_litestar import create_app

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return served_home(tmp_path, monkeypatch, "FOLLOW")


def test_a_funded_wallet_and_a_send_are_on_the_feed_in_order(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(create_container(Settings(home=home, repo="sql")))
    with TestClient(app) as client:
        http = judge_responses_sync(client)
        created = served_cli(capsys, "clients", "create", "--name", "Acme", "--assets", "2,21")
        other = served_cli(capsys, "clients", "create", "--name", "Other", "--assets", "2")

        def auth_of(issued: dict[str, str]) -> dict[str, str]:
            headers = {"x-client-id": issued["clientId"], "x-api-key": issued["apiKey"]}
            token = assert_ok(http.post("/auth", headers=headers))["token"]
            return {"Authorization": f"Bearer {token}"}

        auth, other_auth = auth_of(created), auth_of(other)
        wallet = assert_ok(http.post("/create", json={"password": PASSWORD}, headers=auth))
        user, address = wallet["userId"], wallet["addresses"]["ETHEREUM"]
        time.sleep(0.5)  # the scan's cursor is placed before the coins arrive
        served_cli(
            capsys,
            "sandbox",
            "fund",
            "--chain",
            "ETHEREUM",
            "--address",
            address,
            "--asset",
            "2",
            "--amount",
            "1.5",
        )

        def feed(body: dict[str, Any] | None = None, headers: dict[str, str] = auth) -> Any:
            return assert_ok(http.post("/events", json=body or {}, headers=headers))

        page = until(feed, lambda p: len(p["events"]) >= 2)
        seen, confirmed = page["events"][:2]
        assert (seen["type"], confirmed["type"]) == ("deposit.seen", "deposit.confirmed")
        assert confirmed["userId"] == user and confirmed["data"]["amount"] == "1.5"
        assert confirmed["data"]["address"] == address and confirmed["data"]["from"] is None
        assert page["next"] == confirmed["id"] and page["hasMore"] is False

        listed = assert_ok(http.post("/deposits", json={"userId": user}, headers=auth))
        assert [(d["status"], d["amount"], d["assetId"]) for d in listed] == [
            ("confirmed", "1.5", 2)
        ]

        body = {
            "userId": user,
            "assetId": 2,
            "recipient": RECIPIENT,
            "amount": "0.5",
            "password": PASSWORD,
        }
        sent = assert_ok(http.post("/send", json=body, headers={**auth, "X-Request-Id": "s-1"}))
        later = until(
            lambda: feed({"after": page["next"]}),
            lambda p: (
                any(e["type"] == "send.success" for e in p["events"])
                or any(e["type"] == "send.pending" for e in p["events"])
            ),
        )
        sends = [e for e in later["events"] if e["type"].startswith("send.")]
        assert sends and sends[0]["data"]["txHash"] == sent["txHash"]
        assert sends[0]["data"]["requestId"] == "s-1"
        # what the recipient receives: a USER fee on the coin comes out of the amount
        assert Decimal("0.49") < Decimal(sends[0]["data"]["amount"]) <= Decimal("0.5")

        # the cursor pages the whole feed exactly
        everything = feed({"limit": 1000})["events"]
        cursor, paged = None, []
        while True:
            step = feed({"after": cursor, "limit": 1} if cursor else {"limit": 1})
            paged += [e["id"] for e in step["events"]]
            if not step["events"]:
                break
            cursor = step["next"]
        assert paged == [e["id"] for e in everything]

        # one user's events, by body or by header; another client sees none of them
        assert feed({"userId": user})["events"] == everything
        assert feed(headers={**auth, "X-USER-ID": user})["events"] == everything
        assert feed(headers=other_auth)["events"] == []
        assert_error(
            http.post("/events", json={"userId": user}, headers=other_auth), 404, "User not found"
        )
        assert_error(
            http.post("/deposits", json={"userId": user}, headers=other_auth), 404, "User not found"
        )
        assert_error(
            http.post("/events", json={"after": everything[0]["id"]}, headers=other_auth), 410
        )
        assert_error(
            http.post("/events", json={"after": "evt_0_999999"}, headers=auth),
            400,
            "Unknown cursor: after must be an event id from this feed",
        )
        assert_error(http.post("/events", json={"after": "yesterday"}, headers=auth), 400)
        assert_error(http.post("/events", json={"limit": 0}, headers=auth), 400)
        assert_error(http.post("/events", json={"limit": 1001}, headers=auth), 400)
        assert_error(http.post("/events", json={"cursor": "x"}, headers=auth), 400)
        assert_error(http.post("/events", json={}), 401, "Missing or expired token")
