"""The operator CLI, in process, against the same `WALLETCORE_HOME` as an app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from http_support import assert_error, assert_ok, judge_responses_sync
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_litestar import create_app
from walletcore_litestar.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    # What `main` would default on the sandbox, set here so monkeypatch undoes it after.
    monkeypatch.setenv("WALLETCORE_REPO", "sql")
    return folder


def cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> Any:
    assert main(list(argv)) == status
    out = capsys.readouterr().out
    return json.loads(out) if out.strip() else None


def app_on(home: Path) -> Any:
    """A server's app over the same home (its SQLite file, as `walletcore serve`)."""
    return create_app(create_container(Settings(home=home, repo="sql")))


def test_a_client_created_by_the_cli_signs_in_at_once(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with TestClient(app_on(home)) as client:  # the server is already running
        http = judge_responses_sync(client)
        created = cli(
            capsys,
            "clients",
            "create",
            "--name",
            "Acme",
            "--assets",
            "1,2,21",
            "--fee-payer",
            "PLATFORM",
        )
        assert set(created) == {"clientId", "apiKey"}
        headers = {"x-client-id": created["clientId"], "x-api-key": created["apiKey"]}
        token = assert_ok(http.post("/auth", headers=headers))["token"]
        config = assert_ok(http.post("/config", headers={"Authorization": f"Bearer {token}"}))
        assert [a["assetId"] for a in config["assets"]] == [1, 2, 21]
        assert config["feePayer"] == "PLATFORM"

        # The key is stored only as SHA-256.
        stored = b"".join(p.read_bytes() for p in home.glob("walletcore.db*"))
        assert stored and created["apiKey"].encode() not in stored

        listed = cli(capsys, "clients", "list")
        assert [c["clientId"] for c in listed] == [created["clientId"]]
        assert "apiKey" not in listed[0] and "key_hash" not in json.dumps(listed)

        rotated = cli(capsys, "clients", "rotate", created["clientId"])
        assert rotated["clientId"] == created["clientId"] and rotated["apiKey"] != created["apiKey"]
        assert_error(http.post("/auth", headers=headers), 401, "Invalid credentials")
        auth = {"Authorization": f"Bearer {token}"}
        assert_error(http.post("/prices", headers=auth), 401, "Missing or expired token")
        new = {"x-client-id": created["clientId"], "x-api-key": rotated["apiKey"]}
        token = assert_ok(http.post("/auth", headers=new))["token"]
        auth = {"Authorization": f"Bearer {token}"}

        assert_error(http.post("/platform/addresses", headers=auth), 404)
        addresses = cli(capsys, "platform", "provision", "--client-id", created["clientId"])
        assert list(addresses) == ["BITCOIN", "ETHEREUM"]
        assert assert_ok(http.post("/platform/addresses", headers=auth)) == addresses
        assert cli(capsys, "platform", "provision", "--client-id", created["clientId"]) == addresses

        assert cli(capsys, "clients", "disable", created["clientId"]) == {
            "clientId": created["clientId"],
            "disabled": True,
        }
        assert_error(http.post("/prices", headers=auth), 401)


def test_refusals_exit_1_with_the_core_message(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["clients", "disable", "0" * 24]) == 1
    assert "Api client not found" in capsys.readouterr().err
    assert main(["clients", "create", "--name", "x", "--assets", "1,999"]) == 1
    assert "unknown asset ids" in capsys.readouterr().err
    assert main(["platform", "provision", "--client-id", "nope"]) == 1


def test_bad_configuration_exits_2(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_PROFILE", "production")
    monkeypatch.setenv("WALLETCORE_REPO", "memory")
    assert main(["clients", "list"]) == 2
    assert "configuration error" in capsys.readouterr().err


def test_the_sandbox_defaults_to_the_sql_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    from walletcore_litestar.cli import apply_sandbox_defaults

    env: dict[str, str] = {}
    apply_sandbox_defaults(env)
    assert env == {"WALLETCORE_REPO": "sql"}
    env = {"WALLETCORE_PROFILE": "production"}
    apply_sandbox_defaults(env)
    assert "WALLETCORE_REPO" not in env
    env = {"WALLETCORE_REPO": "memory"}
    apply_sandbox_defaults(env)
    assert env["WALLETCORE_REPO"] == "memory"
