"""The operator CLI, in process, against the same `WALLETCORE_HOME` as an app."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from http_support import assert_error, assert_ok, judge_responses_sync
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_cli import main
from walletcore_litestar import create_app


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    monkeypatch.delenv("WALLETCORE_REPO", raising=False)  # the default: sql, SQLite in home
    return folder


def cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> Any:
    assert main(list(argv)) == status
    out = capsys.readouterr().out
    return json.loads(out) if out.strip() else None


def app_on(home: Path) -> Any:
    """A server's app over the same home (its SQLite file, as `walletcore serve`)."""
    return create_app(create_container(Settings(home=home)))


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
        # The server learns of a change another process made within client_cache_seconds.
        assert refused_within(http, auth, CACHE_BOUND) == "Missing or expired token"
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
        assert refused_within(http, auth, CACHE_BOUND) == "Missing or expired token"


#: `client_cache_seconds` (default 1 s) and slack for a slow machine.
CACHE_BOUND = Settings().client_cache_seconds + 1.0


def refused_within(http: Any, auth: dict[str, str], seconds: float) -> str:
    """Poll `/prices` until the token is refused; fail if that takes longer than `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        response = http.post("/prices", headers=auth)
        if response.status_code == 401:
            return str(assert_error(response, 401)["message"])
        assert response.status_code == 200, response.text
        assert time.monotonic() < deadline, "the token still worked after the cache bound"
        time.sleep(0.05)


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


def test_the_cli_and_create_container_share_one_default_storage(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No WALLETCORE_REPO anywhere: the CLI writes where `create_container()` (and so each
    `walletcore serve` worker) reads, the SQLite file under home, and leaves the environment
    as it found it."""
    before = dict(os.environ)
    created = cli(capsys, "clients", "create", "--name", "Acme")
    assert dict(os.environ) == before
    assert (home / "walletcore.db").exists()

    container = create_container()
    assert container.settings().repo == "sql"

    async def listed() -> list[str]:
        storage = container.storage()
        try:
            return [c.client_id for c in await container.auth().list_clients()]
        finally:
            await storage.aclose()

    assert asyncio.run(listed()) == [created["clientId"]]


def test_serve_offers_the_servers_of_the_binding() -> None:
    from walletcore_cli.main import SERVERS
    from walletcore_litestar.server import SERVERS as BINDING_SERVERS

    assert SERVERS == BINDING_SERVERS


def test_a_command_other_than_serve_does_not_import_the_http_stack(home: Path) -> None:
    probe = (
        "import sys\n"
        "from walletcore_cli import main\n"
        "code = main(['clients', 'list'])\n"
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'litestar', "
        "'granian', 'uvicorn', 'walletcore_litestar'}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr
