"""`walletcore desk show|pause|resume` on a sandbox home (SQLite): the desk's figures per
asset with the client's settlements and the differences found, a pause set by hand and
removed, the refusals (an unknown client or asset, a resume of nothing paused), each
change audited."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.register_assert_rewrite("cli_support")

from cli_support import audit_log, cli

from walletcore.container import create_container
from walletcore.domain.clients import User
from walletcore.domain.ids import new_id
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.settings import Settings
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 6, 1, 10, tzinfo=UTC)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in list(os.environ):  # the test's settings, not the developer's
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    return folder


def owed_buy(home: Path, client_id: str) -> str:
    """A user and a completed buy of 0.8 ETH the desk has not delivered; its trade id."""

    async def seed() -> str:
        storage = create_container(Settings(home=home)).storage()
        try:
            db = autocommit(storage)
            user_id = new_id()
            wallet = WalletRecord(client_id, WalletOwner.USER, user_id, b"", {}, T0)
            assert await db.wallets.add_user(User(user_id, client_id, T0), wallet)
            buy = Settlement(
                trade_id=new_id(),
                client_id=client_id,
                user_id=user_id,
                side=Side.BUY,
                asset_id=2,
                units=8 * 10**17,
                status=SettlementStatus.QUEUED,
                created_at=T0,
                updated_at=T0,
                due_at=T0,
            )
            assert await db.settlements.add(buy)
            return buy.trade_id
        finally:
            await storage.aclose()

    return asyncio.run(seed())


def test_the_operator_reads_the_desk_and_pauses_and_resumes_its_deliveries(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    addresses = cli(capsys, "platform", "provision", "--client-id", client)
    trade_id = owed_buy(home, client)

    (shown,) = cli(capsys, "desk", "show", "--client", client)
    assert shown["clientId"] == client and shown["pauses"] == []
    eth = next(a for a in shown["assets"] if a["assetId"] == 2)
    assert eth["address"] == addresses["ETHEREUM"]
    assert (eth["symbol"], eth["balance"], eth["owed"], eth["short"]) == ("ETH", "0", "0.8", "0.8")
    assert (eth["incoming"], eth["owedTrades"], eth["paused"]) == ("0", [trade_id], None)
    (mismatch,) = shown["mismatches"]
    assert (mismatch["kind"], mismatch["tradeIds"], mismatch["amount"]) == (
        "desk_short",
        [trade_id],
        "0.8",
    )
    (settlement,) = shown["settlements"]
    assert settlement == {
        "tradeId": trade_id,
        "userId": settlement["userId"],
        "side": "buy",
        "assetId": 2,
        "symbol": "ETH",
        "amount": "0.8",
        "status": "queued",
        "attempt": 0,
        "transfer": None,
        "txHash": None,
        "reason": None,
        "updatedAt": "2026-06-01T10:00:00.000Z",
    }
    # one asset's figures only; every client's without --client
    (only,) = cli(capsys, "desk", "show", "--client", client, "--asset", "2")
    assert [a["assetId"] for a in only["assets"]] == [2]
    assert [d["clientId"] for d in cli(capsys, "desk", "show")] == [client]

    paused = cli(
        capsys, "desk", "pause", "--client", client, "--asset", "2", "--reason", "checking"
    )
    assert (paused["assetId"], paused["reason"]) == (2, "checking")
    (shown,) = cli(capsys, "desk", "show", "--client", client, "--asset", "2")
    assert shown["pauses"] == [paused] and shown["assets"][0]["paused"] == paused
    resumed = cli(capsys, "desk", "resume", "--client", client, "--asset", "2")
    assert resumed == {**paused, "paused": False}
    refused = cli(capsys, "desk", "resume", "--client", client, "--asset", "2", status=1)
    assert "Deliveries of ETH are not paused" in refused

    entries = [
        (e.action, e.outcome, e.target)
        for e in reversed(audit_log(home))
        if e.action.startswith("desk.")
    ]
    assert entries == [
        ("desk.pause", "ok", "2"),
        ("desk.resume", "ok", "2"),
        ("desk.resume", "409", "2"),
    ]


def test_an_unknown_client_or_asset_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    assert "Api client not found" in cli(capsys, "desk", "show", "--client", new_id(), status=1)
    assert "not served" in cli(
        capsys, "desk", "show", "--client", client, "--asset", "999", status=1
    )
    refused = cli(capsys, "desk", "pause", "--client", "nope", "--asset", "2", status=1)
    assert "Api client not found" in refused
    with pytest.raises(SystemExit) as usage:  # --client is required
        cli(capsys, "desk", "pause", "--asset", "2")
    assert usage.value.code == 2
