"""The operator CLI, in process against the same `WALLETCORE_HOME` as a running app:
`clients update` / `enable`, `platform balances`, `--version`, help on every option, and
the home line on stderr."""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_cli import main
from walletcore_cli.main import parser
from walletcore_litestar import create_app

pytest.register_assert_rewrite("cli_support")

from cli_support import audit_log, cli

#: `client_cache_seconds` (default 1 s) and slack for a slow machine.
CACHE_BOUND = Settings().client_cache_seconds + 1.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in list(os.environ):  # the test's settings, not the developer's
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    return folder


@pytest.fixture
def http(home: Path) -> Iterator[TestClient[Any]]:
    """A server already running on the same home (its SQLite file, as `walletcore serve`)."""
    with TestClient(create_app(create_container(Settings(home=home)))) as client:
        yield client


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["result"]


def sign_in(http: TestClient[Any], created: dict[str, str]) -> dict[str, str]:
    headers = {"x-client-id": created["clientId"], "x-api-key": created["apiKey"]}
    token = ok(http.post("/auth", headers=headers))["token"]
    return {"Authorization": f"Bearer {token}"}


def config_within(http: TestClient[Any], auth: dict[str, str], wanted: Any) -> Any:
    """Poll `/config` until it answers `wanted(config)`; fail after the cache bound."""
    deadline = time.monotonic() + CACHE_BOUND
    while True:
        config = ok(http.post("/config", headers=auth))
        if wanted(config):
            return config
        assert time.monotonic() < deadline, f"/config still answers {config}"
        time.sleep(0.05)


def payers(config: dict[str, Any]) -> dict[int, str]:
    return {a["assetId"]: a["feePayer"] for a in config["assets"]}


# -- clients update ------------------------------------------------------------------------
def test_update_changes_assets_and_fee_payers_and_config_shows_it(
    home: Path, http: TestClient[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    created = cli(capsys, "clients", "create", "--name", "Acme", "--assets", "1,2,21")
    cid = created["clientId"]
    auth = sign_in(http, created)
    assert ok(http.post("/config", headers=auth))["feePayer"] == "USER"

    updated = cli(
        capsys,
        "clients",
        "update",
        cid,
        "--assets",
        "22,21,2,1",
        "--fee-payer-asset",
        "21=PLATFORM",
        "--fee-payer-asset",
        "22=platform",
    )
    assert updated["assets"] == [1, 2, 21, 22]  # catalog order
    assert (updated["feePayer"], updated["assetFeePayers"]) == (
        "USER",
        {"21": "PLATFORM", "22": "PLATFORM"},
    )
    # The token issued before the change keeps working; the server sees the change within
    # client_cache_seconds, the spec's "changes when the operator changes the account".
    config = config_within(http, auth, lambda c: c["feePayer"] == "PLATFORM")
    assert payers(config) == {1: "USER", 2: "USER", 21: "PLATFORM", 22: "PLATFORM"}

    # The client's fee payer, one exception back to it, one asset dropped with its own.
    cli(
        capsys,
        "clients",
        "update",
        cid,
        "--fee-payer",
        "PLATFORM",
        "--fee-payer-asset",
        "1=USER",
        "--assets",
        "1,2,21",
        "--name",
        "Acme EU",
    )
    config = config_within(http, auth, lambda c: len(c["assets"]) == 3)
    assert payers(config) == {1: "USER", 2: "PLATFORM", 21: "PLATFORM"}
    [listed] = cli(capsys, "clients", "list")
    assert listed["name"] == "Acme EU"
    assert (listed["feePayer"], listed["assetFeePayers"]) == ("PLATFORM", {"1": "USER"})

    cli(capsys, "clients", "update", cid, "--fee-payer-asset", "1=PLATFORM")
    config = config_within(http, auth, lambda c: payers(c)[1] == "PLATFORM")
    assert set(payers(config).values()) == {"PLATFORM"}
    assert cli(capsys, "clients", "list")[0]["assetFeePayers"] == {}

    # Audited with the change, never the key; an update that changes nothing: `replay`.
    cli(capsys, "clients", "update", cid, "--fee-payer", "PLATFORM")
    entries = [e for e in audit_log(home) if e.action == "client.update"][::-1]
    assert [e.outcome for e in entries] == ["ok", "ok", "ok", "replay"]
    assert entries[0].client_id == cid
    assert (
        entries[0].detail == "assets=1,2,21,22 feePayer=USER assetFeePayers=21=PLATFORM,22=PLATFORM"
    )
    assert not [e for e in audit_log(home) if created["apiKey"] in repr(e)]


def test_a_bad_update_is_refused_with_a_clear_message_and_changes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    created = cli(capsys, "clients", "create", "--name", "Acme", "--assets", "1,2,21")
    cid = created["clientId"]
    before = cli(capsys, "clients", "list")

    refused = cli(capsys, "clients", "update", cid, "--assets", "1,999,2", status=1)
    assert "walletcore: unknown asset ids: [999]" in refused
    refused = cli(capsys, "clients", "update", cid, "--fee-payer-asset", "77=PLATFORM", status=1)
    assert "unknown asset ids: [77]" in refused
    refused = cli(capsys, "clients", "update", cid, "--fee-payer-asset", "22=PLATFORM", status=1)
    assert "fee payer for assets the client is not enabled for: [22]" in refused
    refused = cli(capsys, "clients", "update", cid, "--assets", ",", status=1)
    assert "enable at least one asset" in refused
    refused = cli(capsys, "clients", "update", "0" * 24, "--assets", "1", status=1)
    assert "Api client not found" in refused
    assert cli(capsys, "clients", "list") == before
    outcomes = [e.outcome for e in audit_log(home) if e.action == "client.update"]
    assert outcomes == ["404", "400", "400", "400", "400"]

    # Bad usage: exit 2 with argparse's message, before anything runs.
    for argv in (
        ["clients", "update", cid],
        ["clients", "update", cid, "--assets", "1,x"],
        ["clients", "update", cid, "--fee-payer-asset", "21"],
        ["clients", "update", cid, "--fee-payer-asset", "21=ANYONE"],
        ["clients", "update", cid, "--fee-payer", "ANYONE"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2, argv
        assert "error:" in capsys.readouterr().err
    assert cli(capsys, "clients", "list") == before


# -- clients enable ------------------------------------------------------------------------
def test_enable_after_disable_lets_the_client_sign_in_again(
    home: Path, http: TestClient[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    created = cli(capsys, "clients", "create", "--name", "Acme")
    cid = created["clientId"]
    old = sign_in(http, created)
    assert cli(capsys, "clients", "disable", cid) == {"clientId": cid, "disabled": True}
    headers = {"x-client-id": cid, "x-api-key": created["apiKey"]}
    assert http.post("/auth", headers=headers).status_code == 401

    assert cli(capsys, "clients", "enable", cid) == {"clientId": cid, "disabled": False}
    auth = sign_in(http, created)  # /auth reads the client fresh: at once
    deadline = time.monotonic() + CACHE_BOUND
    while (response := http.post("/prices", headers=auth)).status_code == 401:
        assert time.monotonic() < deadline, "a new token still refused after the cache bound"
        time.sleep(0.05)
    assert response.status_code == 200, response.text
    # A token issued before the disable stays dead: the disable moved the key generation.
    assert http.post("/prices", headers=old).status_code == 401

    assert cli(capsys, "clients", "enable", cid) == {"clientId": cid, "disabled": False}
    assert [e.outcome for e in audit_log(home) if e.action == "client.enable"] == [
        "replay",
        "ok",
    ]
    assert "Api client not found" in cli(capsys, "clients", "enable", "0" * 24, status=1)


# -- platform balances ---------------------------------------------------------------------
NATIVE = {
    "BITCOIN": (1, "BTC"),
    "ETHEREUM": (2, "ETH"),
    "BSC": (3, "BNB"),
    "TRON": (4, "TRX"),
    "POLYGON": (5, "POL"),
    "SOLANA": (6, "SOL"),
}


def test_platform_balances_show_every_chains_native_coin(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    created = cli(capsys, "clients", "create", "--name", "Acme", "--assets", "21")
    cid = created["clientId"]
    refused = cli(capsys, "platform", "balances", cid, status=1)
    assert "No platform wallet for this api client" in refused
    assert "Api client not found" in cli(capsys, "platform", "balances", "0" * 24, status=1)

    cli(capsys, "platform", "provision", "--client-id", cid)
    balances = cli(capsys, "platform", "balances", cid)
    assert list(balances) == list(NATIVE)  # every chain, not only the enabled ones
    for chain, (asset, symbol) in NATIVE.items():
        assert balances[chain]["asset"] == asset and balances[chain]["symbol"] == symbol
        assert balances[chain]["balance"] == "0", balances[chain]
        assert balances[chain]["address"]

    for chain, amount in (("ETHEREUM", "1.5"), ("BSC", "0.25"), ("SOLANA", "2")):
        asset = str(NATIVE[chain][0])
        address = balances[chain]["address"]
        argv = ["--chain", chain, "--address", address, "--asset", asset, "--amount", amount]
        cli(capsys, "sandbox", "fund", *argv)
    after = cli(capsys, "platform", "balances", cid)
    assert {chain: shown["balance"] for chain, shown in after.items()} == {
        "BITCOIN": "0",
        "ETHEREUM": "1.5",
        "BSC": "0.25",
        "TRON": "0",
        "POLYGON": "0",
        "SOLANA": "2",
    }

    # A chain whose node cannot be read shows why; the other chains still show.
    monkeypatch.setenv("WALLETCORE_CHAIN_SOLANA", "solana:rpc")
    monkeypatch.setenv("WALLETCORE_SOLANA_RPC_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("WALLETCORE_SOLANA_RPC_TIMEOUT_SECONDS", "5")
    partial = cli(capsys, "platform", "balances", cid)
    assert "balance" not in partial["SOLANA"] and partial["SOLANA"]["error"], partial
    assert partial["SOLANA"]["address"] == after["SOLANA"]["address"]
    assert partial["ETHEREUM"]["balance"] == "1.5"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- --version, help, the home line --------------------------------------------------------
def test_version_is_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"walletcore {metadata.version('walletcore')}"
    assert "home" not in captured.err


def walk(command: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield command.prog, command
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from walk(sub)


def test_every_command_and_option_has_help() -> None:
    commands = dict(walk(parser()))
    assert "walletcore clients update" in commands and "walletcore platform balances" in commands
    missing = []
    for prog, command in commands.items():
        for action in command._actions:
            if not (action.help or "").strip():
                missing.append(f"{prog}: {action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                missing += [
                    f"{prog} {choice.dest}"
                    for choice in action._choices_actions
                    if not (choice.help or "").strip()
                ]
    assert missing == []


def test_help_prints_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for prog in dict(walk(parser())):
        argv = prog.split()[1:]
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--help"])
        assert exited.value.code == 0, prog
        captured = capsys.readouterr()
        assert captured.out.startswith(f"usage: {prog}"), captured.out
        assert captured.err == "", prog  # no home line: nothing was acted on


def test_every_command_names_its_home_on_stderr_and_keeps_stdout_json(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = f"walletcore: home {home.resolve()}"
    created = cli(capsys, "clients", "create", "--name", "Acme")  # stdout parses as JSON
    main(["clients", "list"])
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["clientId"] == created["clientId"]
    assert captured.err.splitlines()[0] == line
    main(["clients", "disable", "0" * 24])  # a refusal names it too
    assert capsys.readouterr().err.splitlines()[0] == line


def run_elsewhere(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`walletcore clients list` as an operator runs it: a shell in some directory."""
    return subprocess.run(
        [sys.executable, "-m", "walletcore_cli", "clients", "list"],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_home_line_names_where_state_went(tmp_path: Path) -> None:
    """A relative WALLETCORE_HOME, and none at all: the line is an absolute path, and the
    database is there."""
    done = run_elsewhere(tmp_path, WALLETCORE_HOME="relative-home")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    home = tmp_path.resolve() / "relative-home"
    assert f"walletcore: home {home}" in done.stderr.splitlines()
    assert (home / "walletcore.db").exists()

    done = run_elsewhere(tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("walletcore: home ")]
    default = Path(line.removeprefix("walletcore: home "))
    assert default.is_absolute() and (default / "walletcore.db").exists(), line


# -- worker ----------------------------------------------------------------------------------
def test_worker_is_a_command_with_a_concurrency_option() -> None:
    args = parser().parse_args(["worker", "--concurrency", "3"])
    assert (args.command, args.concurrency) == ("worker", 3)
    assert parser().parse_args(["worker"]).concurrency == 1


def test_worker_dispatches_to_its_module(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("walletcore_cli.worker") is None:
        pytest.skip("walletcore_cli.worker is not there yet")
    import walletcore_cli.worker as module

    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(module, "worker", lambda args: seen.append(args) or 0)
    assert main(["worker", "--concurrency", "2"]) == 0
    assert [a.concurrency for a in seen] == [2]
    assert capsys.readouterr().err.startswith("walletcore: home ")


# -- sends (docs/transfers.md) ---------------------------------------------------------------
def test_sends_list_and_show_a_followed_send_and_refuse_what_cannot_be_done(
    home: Path, http: TestClient[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    created = cli(capsys, "clients", "create", "--name", "Acme", "--assets", "2")
    cid = created["clientId"]
    platform = cli(capsys, "platform", "provision", "--client-id", cid)
    argv = ["--chain", "ETHEREUM", "--address", platform["ETHEREUM"], "--asset", "2"]
    cli(capsys, "sandbox", "fund", *argv, "--amount", "1")
    auth = sign_in(http, created)
    body = {"assetId": 2, "recipient": "0x52908400098527886E0F7030069857D2E4169EE7"}
    sent = ok(
        http.post(
            "/platform/send",
            json={**body, "amount": "0.1"},
            headers={**auth, "X-Request-Id": "pay-1"},
        )
    )
    shown = cli(capsys, "sends", "show", cid, "pay-1")
    assert shown["current"]["txHash"] == sent["txHash"]
    assert (shown["chain"], shown["userId"], shown["earlier"]) == ("ETHEREUM", None, [])
    assert shown["status"] in ("pending", "success")
    assert "raw" not in json.dumps(shown)  # never the transaction's bytes
    listed = cli(capsys, "sends", "list")
    if shown["status"] == "pending":
        assert [(s["clientId"], s["requestId"]) for s in listed] == [(cid, "pay-1")]
    # the sandbox chain settles by itself: nothing to bump or cancel
    refused = cli(capsys, "sends", "bump", cid, "pay-1", status=1)
    assert "cannot replace transfers" in refused or "already final" in refused
    assert "no signed send" in cli(capsys, "sends", "show", cid, "nope", status=1)
    assert "no signed send" in cli(capsys, "sends", "cancel", "0" * 24, "pay-1", status=1)
