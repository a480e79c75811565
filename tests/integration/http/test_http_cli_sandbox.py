"""`walletcore sandbox fund`, in process, while a server runs on the same `WALLETCORE_HOME`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, assert_ok, judge_responses_sync
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_cli import main
from walletcore_litestar import create_app

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    monkeypatch.delenv("WALLETCORE_REPO", raising=False)  # the default: sql, SQLite in home
    return folder


def cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> Any:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return json.loads(captured.out) if captured.out.strip() else captured.err


def test_coins_funded_by_the_cli_are_spendable_on_the_running_server(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(create_container(Settings(home=home, repo="sql")))
    with TestClient(app) as client:
        http = judge_responses_sync(client)
        created = cli(capsys, "clients", "create", "--name", "Acme", "--assets", "2,21")
        headers = {"x-client-id": created["clientId"], "x-api-key": created["apiKey"]}
        token = assert_ok(http.post("/auth", headers=headers))["token"]
        auth = {"Authorization": f"Bearer {token}"}
        wallet = assert_ok(http.post("/create", json={"password": PASSWORD}, headers=auth))
        address = wallet["addresses"]["ETHEREUM"]

        funded = cli(
            capsys,
            "sandbox",
            "fund",
            "--chain",
            "ethereum",
            "--address",
            address.lower(),
            "--asset",
            "2",
            "--amount",
            "1.5",
        )
        assert funded == {
            "chain": "ETHEREUM",
            "address": address,
            "assetId": 2,
            "symbol": "ETH",
            "balance": "1.5",
        }
        balance = http.post(
            "/balance", json={"userId": wallet["userId"], "assetId": 2}, headers=auth
        )
        assert assert_ok(balance) == "1.5"
        body = {
            "userId": wallet["userId"],
            "assetId": 2,
            "recipient": RECIPIENT,
            "amount": "0.5",
            "password": PASSWORD,
        }
        sent = assert_ok(http.post("/send", json=body, headers={**auth, "X-Request-Id": "cli-1"}))
        assert sent["feePayer"] == "USER"
        again = cli(
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
            "1",
        )
        assert again["balance"] == "2"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--chain", "ETHEREUM", "--address", "0x12", "--asset", "2", "--amount", "1"], "address"),
        (["--chain", "TRON", "--address", RECIPIENT, "--asset", "2", "--amount", "1"], "not TRON"),
        (
            ["--chain", "ETHEREUM", "--address", RECIPIENT, "--asset", "2", "--amount", "x"],
            "amount",
        ),
    ],
)
def test_fund_refuses_bad_input_with_exit_1(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    err = cli(capsys, "sandbox", "fund", *argv, status=1)
    assert message in err


def test_fund_refuses_the_production_profile(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_PROFILE", "production")
    argv = ["--chain", "ETHEREUM", "--address", RECIPIENT, "--asset", "2", "--amount", "1"]
    err = cli(capsys, "sandbox", "fund", *argv, status=2)
    assert "configuration error" in err
