"""`walletcore policies|operators|approvals ...` on a sandbox home (SQLite), docs/policies.md:
a policy set from a file or stdin, shown, a pending version cancelled; the allowlist with
the chain's address check; the dry run naming the rule; operators added (the key shown
once), listed (never a key) and disabled; approvals listed, shown, approved by distinct
operators and rejected. Operators authenticate with the key of WALLETCORE_OPERATOR_KEY or
of a prompt: a wrong key, a second approval by one operator and an operator approving a
transfer they initiated are refused. Every change audited, no key anywhere."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("cli_support")

from cli_support import audit_log, cli

from walletcore.container import create_container
from walletcore.domain.assets import Chain
from walletcore.domain.ids import new_id
from walletcore.domain.policies import Approval, Destination, Origin, Transfer, WalletKind
from walletcore.settings import Settings
from walletcore.testing.storage import autocommit

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
REFUSED = "Unknown operator, disabled operator or wrong operator key"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in list(os.environ):  # the test's settings, not the developer's
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    return folder


def max_eth(limit: str = "1", **settings: Any) -> dict[str, Any]:
    """Sends of more than `limit` ETH from a user's wallet are refused; the rest allowed."""
    return {
        "default": "allow",
        "rules": [
            {
                "name": "max-eth",
                "wallet": "user",
                "action": "deny",
                "over": {"amount": limit, "assetId": 2},
            }
        ],
        **settings,
    }


def as_operator(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("WALLETCORE_OPERATOR_KEY", key)


def held(home: Path, client_id: str, *, initiated_by: str, required: int = 2) -> str:
    """A transfer of 0.6 ETH held for `required` approvals; its approval's id."""

    async def seed() -> str:
        storage = create_container(Settings(home=home)).storage()
        try:
            now = datetime.now(UTC)
            approval = Approval(
                id=f"apr_{new_id()}",
                client_id=client_id,
                request_id=f"send-{new_id()}",
                rule="big-eth",
                required=required,
                initiated_by=initiated_by,
                transfer=Transfer(
                    wallet=WalletKind.USER,
                    origin=Origin.SEND,
                    user_id=new_id(),
                    chain=Chain.ETHEREUM,
                    asset_id=2,
                    symbol="ETH",
                    decimals=18,
                    amount_units=6 * 10**17,
                    recipient=RECIPIENT,
                    destination=Destination.OTHER,
                ),
                created_at=now,
                expires_at=now + timedelta(days=1),
            )
            assert await autocommit(storage).policies.add_approval(approval)
            return approval.id
        finally:
            await storage.aclose()

    return asyncio.run(seed())


def test_a_policy_is_set_shown_and_a_pending_change_cancelled(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    empty = cli(capsys, "policies", "show", client)
    assert empty == {"inForce": None, "pending": [], "allowlist": []}
    document = tmp_path / "policy.json"
    document.write_text(json.dumps(max_eth("1", changeDelaySeconds=3600)))
    first = cli(capsys, "policies", "set", client, str(document))
    assert (first["version"], first["setBy"]) == (1, "cli")
    assert first["effectiveAt"] == first["setAt"]  # a client's first policy: at once
    assert first["policy"]["rules"][0]["over"] == {"amount": "1", "assetId": 2}

    operator = cli(capsys, "operators", "add", "alice")
    as_operator(monkeypatch, operator["key"])
    # the next one from stdin, by an operator: it waits the delay of the one in force
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(max_eth("0.1"))))
    second = cli(capsys, "policies", "set", client, "-", "--operator", "alice")
    assert (second["version"], second["setBy"]) == (2, "alice")
    assert second["effectiveAt"] > second["setAt"]
    shown = cli(capsys, "policies", "show", client)
    assert shown["inForce"]["version"] == 1
    assert [v["version"] for v in shown["pending"]] == [2]
    cancelled = cli(capsys, "policies", "cancel", client, "2", "--operator", "alice")
    assert cancelled == {"clientId": client, "version": 2, "cancelled": True}
    assert cli(capsys, "policies", "show", client)["pending"] == []
    refused = cli(capsys, "policies", "cancel", client, "1", status=1)
    assert "No pending version 1" in refused

    # what is not a policy document changes nothing
    document.write_text("{not json")
    assert "not JSON" in cli(capsys, "policies", "set", client, str(document), status=1)
    document.write_text(json.dumps({"rules": [{"name": "x", "wallet": "user"}]}))
    assert "Invalid policy" in cli(capsys, "policies", "set", client, str(document), status=1)
    missing = str(tmp_path / "missing.json")
    assert "Cannot read" in cli(capsys, "policies", "set", client, missing, status=1)
    document.write_text(json.dumps(max_eth("2")))
    assert "Api client not found" in cli(
        capsys, "policies", "set", "f" * 24, str(document), status=1
    )
    assert "Api client not found" in cli(capsys, "policies", "show", "nobody", status=1)
    assert cli(capsys, "policies", "show", client)["inForce"]["version"] == 1

    changes = [
        (e.action, e.detail or "")
        for e in reversed(audit_log(home))
        if e.action.startswith("policy.")
    ]
    assert [a for a, _ in changes] == ["policy.set", "policy.set", "policy.cancel"]
    assert changes[0][1].startswith("set by cli") and changes[1][1].startswith("set by alice")
    assert changes[2][1] == "cancelled by alice"


def test_the_allowlist_takes_addresses_the_chain_accepts(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    lower = RECIPIENT.lower()
    added = cli(
        capsys, "policies", "allow", client, "ethereum", lower, "--label", "Cold", "--asset", "2"
    )
    assert (added["chain"], added["assetId"], added["label"]) == ("ETHEREUM", 2, "Cold")
    assert added["usableAt"] == added["addedAt"]  # no policy: no cooling-off
    assert cli(capsys, "policies", "show", client)["allowlist"] == [added]
    bad = cli(capsys, "policies", "allow", client, "ETHEREUM", "0x1234", "--label", "X", status=1)
    assert "address" in bad
    assert "Unknown chain" in cli(
        capsys, "policies", "allow", client, "DOGE", lower, "--label", "X", status=1
    )
    assert "not on" in cli(
        capsys,
        "policies",
        "allow",
        client,
        "TRON",
        "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
        "--label",
        "X",
        "--asset",
        "2",
        status=1,
    )
    operator = cli(capsys, "operators", "add", "bob")
    as_operator(monkeypatch, operator["key"])
    removed = cli(
        capsys,
        "policies",
        "disallow",
        client,
        "ETHEREUM",
        added["address"],
        "--asset",
        "2",
        "--operator",
        "bob",
    )
    assert removed["removed"] is True
    assert cli(capsys, "policies", "show", client)["allowlist"] == []
    again = cli(
        capsys,
        "policies",
        "disallow",
        client,
        "ETHEREUM",
        added["address"],
        "--asset",
        "2",
        status=1,
    )
    assert "not on the client's allowlist" in again
    entries = [(e.action, e.detail) for e in audit_log(home) if e.action.startswith("policy.")]
    assert entries[0] == ("policy.allowlist.remove", "removed by bob")
    assert entries[1][0] == "policy.allowlist.add" and "added by cli" in str(entries[1][1])


def test_the_dry_run_names_the_rule_and_writes_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    document = tmp_path / "policy.json"
    document.write_text(json.dumps(max_eth("1")))
    cli(capsys, "policies", "set", client, str(document))
    user = new_id()
    common = ("--asset", "2", "--to", RECIPIENT)
    over = cli(
        capsys,
        "policies",
        "evaluate",
        client,
        "--wallet",
        "user",
        "--user",
        user,
        *common,
        "--amount",
        "1.5",
    )
    assert (over["action"], over["rule"], over["version"]) == ("deny", "max-eth", 1)
    assert over["destination"] == "other" and "over 1 ETH on ETHEREUM" in over["reason"]
    under = cli(
        capsys,
        "policies",
        "evaluate",
        client,
        "--wallet",
        "user",
        "--user",
        user,
        *common,
        "--amount",
        "0.5",
    )
    assert (under["action"], under["rule"]) == ("allow", "(default)")
    platform = cli(
        capsys,
        "policies",
        "evaluate",
        client,
        "--wallet",
        "platform",
        *common,
        "--amount",
        "5",
        "--origin",
        "delivery",
    )
    assert (platform["action"], platform["rule"]) == ("allow", "(default)")
    assert "--user is required" in cli(
        capsys,
        "policies",
        "evaluate",
        client,
        "--wallet",
        "user",
        *common,
        "--amount",
        "1",
        status=1,
    )
    assert "address" in cli(
        capsys,
        "policies",
        "evaluate",
        client,
        "--wallet",
        "platform",
        "--asset",
        "2",
        "--to",
        "nowhere",
        "--amount",
        "1",
        status=1,
    )
    assert not [e for e in audit_log(home) if e.action == "policy.decide"]


def test_operators_are_added_listed_and_disabled_never_showing_a_key(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    added = cli(capsys, "operators", "add", "alice")
    key = added["key"]
    assert added["name"] == "alice" and added["active"] is True and len(key) >= 32
    cli(capsys, "operators", "add", "bob")
    assert "exists already" in cli(capsys, "operators", "add", "alice", status=1)
    assert "An operator's name" in cli(capsys, "operators", "add", "no spaces", status=1)
    listed = cli(capsys, "operators", "list")
    assert [(o["name"], o["active"]) for o in listed] == [("alice", True), ("bob", True)]
    assert all(set(o) == {"name", "active", "createdAt", "disabledAt"} for o in listed)
    assert cli(capsys, "operators", "disable", "alice") == {"name": "alice", "active": False}
    assert "No active operator" in cli(capsys, "operators", "disable", "alice", status=1)
    assert cli(capsys, "operators", "list")[0]["disabledAt"] is not None
    # a disabled operator's key no longer works
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    approval = held(home, client, initiated_by=f"client:{client}")
    as_operator(monkeypatch, key)
    refused = cli(capsys, "approvals", "approve", approval, "--operator", "alice", status=1)
    assert REFUSED in refused
    digest = hashlib.sha256(key.encode()).hexdigest()
    texts = [json.dumps(listed), refused, repr(audit_log(home))]
    assert all(key not in t and digest not in t for t in texts)


def test_operators_approve_and_reject_held_transfers(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    other = cli(capsys, "clients", "create", "--name", "Other")["clientId"]
    keys = {
        name: cli(capsys, "operators", "add", name)["key"] for name in ("alice", "bob", "carol")
    }
    first = held(home, client, initiated_by=f"client:{client}")
    (listed,) = cli(capsys, "approvals", "list", "--client", client)
    assert (listed["id"], listed["status"], listed["required"]) == (first, "pending", 2)
    assert (listed["clientId"], listed["amount"], listed["approvers"]) == (client, "0.6", [])
    assert cli(capsys, "approvals", "list", "--client", other) == []
    assert cli(capsys, "approvals", "list", "--status", "approved") == []
    assert cli(capsys, "approvals", "show", first) == listed
    assert "No approval" in cli(capsys, "approvals", "show", "apr_nothing", status=1)

    as_operator(monkeypatch, keys["alice"])
    once = cli(capsys, "approvals", "approve", first, "--operator", "alice")
    assert (once["status"], once["approvers"]) == ("pending", ["alice"])
    twice = cli(capsys, "approvals", "approve", first, "--operator", "alice", status=1)
    assert "alice has approved" in twice
    # a wrong key is refused whoever it names
    as_operator(monkeypatch, keys["alice"])
    assert REFUSED in cli(capsys, "approvals", "approve", first, "--operator", "bob", status=1)
    as_operator(monkeypatch, "not-a-key")
    assert REFUSED in cli(capsys, "approvals", "reject", first, "--operator", "bob", status=1)
    as_operator(monkeypatch, keys["bob"])
    done = cli(capsys, "approvals", "approve", first, "--operator", "bob")
    assert (done["status"], done["approvers"]) == ("approved", ["alice", "bob"])
    assert done["decidedAt"] is not None
    late = cli(capsys, "approvals", "reject", first, "--operator", "bob", status=1)
    assert "not pending" in late

    # an operator never approves a transfer they initiated; another may reject it
    mine = held(home, client, initiated_by="carol", required=1)
    as_operator(monkeypatch, keys["carol"])
    own = cli(capsys, "approvals", "approve", mine, "--operator", "carol", status=1)
    assert "never approves a transfer they initiated" in own
    as_operator(monkeypatch, keys["alice"])
    rejected = cli(
        capsys, "approvals", "reject", mine, "--operator", "alice", "--reason", "unknown payee"
    )
    assert rejected["status"] == "rejected"
    assert rejected["reason"] == "rejected by alice: unknown payee"
    statuses = [a["status"] for a in cli(capsys, "approvals", "list", "--client", client)]
    assert statuses == ["rejected", "approved"]  # newest first
    (only,) = cli(capsys, "approvals", "list", "--status", "rejected")
    assert only["id"] == mine

    decisions = [(e.action, e.target) for e in reversed(audit_log(home))]
    assert [d for d in decisions if d[0].startswith("approval.")] == [
        ("approval.approve", first),
        ("approval.approve", first),
        ("approval.reject", mine),
    ]
    text = repr(audit_log(home))
    assert all(key not in text for key in keys.values())


def test_the_key_is_prompted_on_a_terminal_and_never_an_argument(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    key = cli(capsys, "operators", "add", "alice")["key"]
    approval = held(home, client, initiated_by=f"client:{client}", required=1)
    # neither the variable nor a terminal: refused, nothing asked
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    refused = cli(capsys, "approvals", "approve", approval, "--operator", "alice", status=1)
    assert "WALLETCORE_OPERATOR_KEY" in refused
    # on a terminal: asked without echo
    prompts: list[str] = []

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def getpass(prompt: str = "") -> str:
        prompts.append(prompt)
        return str(key)

    monkeypatch.setattr("sys.stdin", Terminal(""))
    monkeypatch.setattr("getpass.getpass", getpass)
    approved = cli(capsys, "approvals", "approve", approval, "--operator", "alice")
    assert approved["status"] == "approved" and prompts == ["Operator key of alice: "]
    # there is no option to give it
    with pytest.raises(SystemExit) as usage:
        cli(capsys, "approvals", "approve", approval, "--operator", "alice", "--key", key)
    assert usage.value.code == 2
    assert "unrecognized arguments: --key" in capsys.readouterr().err
