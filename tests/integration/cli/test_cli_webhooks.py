"""`walletcore webhooks ...` on a sandbox home (SQLite): set shows the secret once and
stores it sealed; show never shows it; rotate, pause, resume, deliveries and replay; the
refusals (an unknown client, a URL the deployment does not allow, a replay of no event);
every change audited without a secret."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

pytest.register_assert_rewrite("cli_support")

from cli_support import audit_log, cli


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in list(os.environ):  # the test's settings, not the developer's
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    return folder


def stored_row(home: Path, client_id: str) -> dict[str, object]:
    with sqlite3.connect(home / "walletcore.db") as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM webhook_endpoints WHERE client_id = ?", (client_id,))
        return dict(row.fetchone())


def test_the_operator_sets_rotates_pauses_and_reads_a_clients_webhook(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    url = "https://hooks.example.com/walletcore?token=integrator-token"
    created = cli(capsys, "webhooks", "set", "--client", client, "--url", url)
    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert created["endpoint"]["url"] == url and created["endpoint"]["cursor"] is None
    shown = cli(capsys, "webhooks", "show", "--client", client)
    assert "secret" not in shown and secret not in str(shown)
    assert (shown["paused"], shown["disabled"], shown["rotatingUntil"]) == (False, False, None)
    # at rest: sealed under the master key, neither the text nor the bytes
    row = stored_row(home, client)
    import base64

    raw = base64.b64decode(secret.removeprefix("whsec_"))
    assert raw not in row["secret"] and secret.encode() not in row["secret"]
    assert row["secret"][:2] == b"\x01\x03"  # sealing version 1, scheme 3
    # the same URL again: nothing changes, no secret shown
    again = cli(capsys, "webhooks", "set", "--client", client, "--url", url)
    assert "secret" not in again
    rotated = cli(capsys, "webhooks", "rotate", "--client", client)
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != secret
    assert rotated["endpoint"]["rotatingUntil"] is not None
    assert cli(capsys, "webhooks", "pause", "--client", client)["paused"] is True
    assert cli(capsys, "webhooks", "resume", "--client", client)["paused"] is False
    assert cli(capsys, "webhooks", "deliveries", "--client", client, "--limit", "5") == []
    refused = cli(capsys, "webhooks", "replay", "--client", client, "--from", "evt_0_42", status=1)
    assert "not in this client's feed" in refused
    entries = [
        (e.action, e.outcome) for e in reversed(audit_log(home)) if e.action.startswith("webhook.")
    ]
    assert entries == [
        ("webhook.set", "ok"),
        ("webhook.set", "replay"),
        ("webhook.rotate", "ok"),
        ("webhook.pause", "ok"),
        ("webhook.resume", "ok"),
        ("webhook.replay", "400"),
    ]
    text = repr(audit_log(home))
    for shown_secret in (secret, rotated["secret"]):
        assert shown_secret not in text
    assert "integrator-token" not in text


def test_the_refusals_say_why(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    missing = cli(capsys, "webhooks", "show", "--client", client, status=1)
    assert "set its URL first" in missing
    unknown = cli(
        capsys, "webhooks", "set", "--client", "a" * 24, "--url", "https://h.example/", status=1
    )
    assert "Api client not found" in unknown
    bad = cli(capsys, "webhooks", "set", "--client", client, "--url", "ftp://h.example/", status=1)
    assert "https://" in bad
    # the sandbox allows plain http and private targets; an operator can say no
    assert cli(capsys, "webhooks", "set", "--client", client, "--url", "http://127.0.0.1:9/h")
    monkeypatch.setenv("WALLETCORE_WEBHOOK_ALLOW_PRIVATE", "false")
    inside = cli(
        capsys, "webhooks", "set", "--client", client, "--url", "http://10.0.0.5/h", status=1
    )
    assert "private address" in inside
