"""Webhooks on a served sandbox (SQLite, in-process jobs): the operator sets a client's
webhook to a loopback receiver (`walletcore webhooks set`); a wallet funded with
`walletcore sandbox fund` is a deposit whose `deposit.seen` and `deposit.confirmed` are
posted to it by the delivery job, in order, each verifying with `standardwebhooks` under
the secret the command printed; the same events the feed serves; and the client reads
its delivery log at `POST /webhooks/deliveries`, held to the served OpenAPI document."""

from __future__ import annotations

import threading
import time
from email.message import Message
from pathlib import Path

import pytest
from http_support import PASSWORD, assert_ok, judge_responses_sync, served_cli, served_home, until
from litestar.testing import TestClient
from standardwebhooks.webhooks import Webhook

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore.testing.http import LoopbackHttpServer
from walletcore_litestar import create_app
from walletcore_webhooks.sender import HttpxSender


class Receiver(LoopbackHttpServer):
    """Keeps each message (headers and raw body) and answers 204."""

    methods = ("POST",)

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[dict[str, str], bytes]] = []
        self._lock = threading.Lock()

    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        with self._lock:
            self.messages.append(({k.lower(): v for k, v in headers.items()}, body))
        return 204, "text/plain", b""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return served_home(tmp_path, monkeypatch, "WEBHOOK")


def test_a_deposit_is_posted_to_the_clients_webhook_signed_and_in_order(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Receiver() as receiver:
        # the sender of `walletcore[webhooks]`, given here as the container's adapter
        container = create_container(
            Settings(home=home, repo="sql"), webhook_sender=HttpxSender(allow_private=True)
        )
        app = create_app(container)
        with TestClient(app) as client:
            http = judge_responses_sync(client)
            created = served_cli(capsys, "clients", "create", "--name", "Acme", "--assets", "2")
            client_id = created["clientId"]
            hook = served_cli(
                capsys, "webhooks", "set", "--client", client_id, "--url", receiver.url
            )
            verifier = Webhook(hook["secret"])
            headers = {"x-client-id": client_id, "x-api-key": created["apiKey"]}
            token = assert_ok(http.post("/auth", headers=headers))["token"]
            auth = {"Authorization": f"Bearer {token}"}
            wallet = assert_ok(http.post("/create", json={"password": PASSWORD}, headers=auth))
            address = wallet["addresses"]["ETHEREUM"]
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
            until(lambda: list(receiver.messages), lambda m: len(m) >= 2)
            payloads = [verifier.verify(body, got) for got, body in receiver.messages]
            assert [p["type"] for p in payloads][:2] == ["deposit.seen", "deposit.confirmed"]
            assert payloads[1]["data"]["amount"] == "1.5"
            assert payloads[1]["userId"] == wallet["userId"]
            assert [got["webhook-id"] for got, _ in receiver.messages] == [
                p["id"] for p in payloads
            ]
            feed = assert_ok(http.post("/events", json={}, headers=auth))["events"]
            assert payloads == feed[: len(payloads)]  # the very events the feed serves
            log = assert_ok(http.post("/webhooks/deliveries", json={}, headers=auth))
            assert [(d["eventId"], d["result"], d["status"]) for d in reversed(log)] == [
                (p["id"], "delivered", 204) for p in payloads
            ]
            shown = served_cli(capsys, "webhooks", "show", "--client", client_id)
            assert shown["cursor"] == payloads[-1]["id"]
