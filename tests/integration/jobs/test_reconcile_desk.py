"""The `reconcile_desk` job on SQLite with the sandbox chains: listed with its period
(`WALLETCORE_JOBS_RECONCILE_SECONDS`, 300 s) and registered by procrastinate's app; a run
reports the desk short with its trades, pauses the asset over the tolerance, audits a
change of differences once, and tells the observer the desk's figures (/metrics)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from follow_support import Sender, sending_container

from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.domain.assets import Chain
from walletcore.domain.ids import new_id
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side
from walletcore.jobs import Jobs
from walletcore.ports import Observer
from walletcore.services.desk import DeskSettings
from walletcore.settings import Settings
from walletcore.testing.storage import autocommit
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage

T0 = datetime(2026, 5, 1, 9, tzinfo=UTC)
ETH = 2


class Recording(Observer):
    def __init__(self) -> None:
        self.desks: list[tuple[str, str, dict[str, Any]]] = []

    def desk_account(self, client_id: str, symbol: str, **figures: Any) -> None:
        self.desks.append((client_id, symbol, figures))


@dataclasses.dataclass
class World:
    storage: SqlStorage
    sender: Sender
    jobs: Jobs
    observer: Recording

    @property
    def client_id(self) -> str:
        assert self.sender.client is not None
        return self.sender.client.client_id


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    storage = SqlStorage(sqlite_url(tmp_path / "walletcore.db"), migrate=True)
    await storage.start()
    container = sending_container(
        storage,
        home=tmp_path / "home",
        clock=ManualClock(T0),
        desk_settings=DeskSettings(tolerance={ETH: Decimal("0.1")}),
    )
    jobs = container.jobs()
    observer = jobs.observer = Recording()
    sender = await Sender(container).start()
    try:
        yield World(storage, sender, jobs, observer)
    finally:
        await storage.aclose()


def test_the_jobs_list_the_reconciliation_and_its_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def periods() -> dict[str, float]:
        container = create_container(Settings(home=tmp_path, repo="memory"))
        return {j.name: j.every_seconds for j in container.jobs().periodic()}

    assert periods()["reconcile_desk"] == 300.0
    monkeypatch.setenv("WALLETCORE_JOBS_RECONCILE_SECONDS", "60")
    assert periods()["reconcile_desk"] == 60.0


def test_procrastinate_runs_the_reconciliation_every_period(tmp_path: Path) -> None:
    from walletcore_jobs.app import make_app

    settings = Settings(
        home=tmp_path, repo="memory", database_url="postgresql+asyncpg://u:p@127.0.0.1:5432/x"
    )
    app = make_app(create_container(settings))
    assert "walletcore.reconcile_desk" in app.tasks
    crons = {k[1]: v.cron for k, v in app.periodic_registry.periodic_tasks.items()}
    assert crons["reconcile_desk"] == "*/5 * * * *"


def test_the_tolerance_is_read_like_the_fee_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALLETCORE_DESK_TOLERANCE", '{"2": "0.05", "21": "10"}')
    assert DeskSettings().tolerance == {2: Decimal("0.05"), 21: Decimal(10)}


async def test_a_run_reports_a_short_desk_once_and_does_not_pause_it(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    await world.sender.platform(Chain.ETHEREUM, ETH, "0.5")
    user_id, _ = await world.sender.user()
    buy = Settlement(
        trade_id=new_id(),
        client_id=world.client_id,
        user_id=user_id,
        side=Side.BUY,
        asset_id=ETH,
        units=8 * 10**17,
        status=SettlementStatus.QUEUED,
        created_at=T0,
        updated_at=T0,
        due_at=T0,
    )
    db = autocommit(world.storage)
    assert await db.settlements.add(buy)

    with caplog.at_level(logging.WARNING, logger="walletcore.desk"):
        assert await world.jobs.reconcile_desk() == 1
    assert any(buy.trade_id in r.getMessage() for r in caplog.records)
    # short inventory is reported, not paused: the delivery goes once the desk is topped up
    assert await db.desk_pauses.of_client(world.client_id) == []
    eth = [f for c, s, f in world.observer.desks if (c, s) == (world.client_id, "ETH")]
    assert eth == [
        {
            "balance": 0.5,
            "owed": 0.8,
            "incoming": 0.0,
            "mismatches": 1,
            "paused": False,
        }
    ]

    assert await world.jobs.reconcile_desk() == 1  # standing: reported, not written again
    newest = await db.audit.newest(100)
    actions = [e.action for e in reversed(newest) if e.action.startswith("desk.")]
    assert actions == ["desk.mismatch"]
    (mismatch,) = [e for e in newest if e.action == "desk.mismatch"]
    assert mismatch.request_id.startswith("job-reconcile-")
    assert mismatch.detail == (
        "desk_short:2:desk (the desk holds 0.5 ETH and owes 0.8 ETH to deliveries "
        f"(0 ETH of it in flight); trades {buy.trade_id})"
    )


def test_the_desk_gauges_appear_with_the_first_reconciliation() -> None:
    from walletcore_litestar.metrics import PrometheusObserver

    observer = PrometheusObserver()
    assert b"walletcore_desk_" not in observer.exposition()  # never a false 0
    observer.desk_account(
        "c" * 24, "ETH", balance=0.5, owed=0.8, incoming=0.25, mismatches=1, paused=True
    )
    observer.desk_account(
        "c" * 24, "USDT", balance=None, owed=0.0, incoming=0.0, mismatches=0, paused=False
    )
    text = observer.exposition().decode()
    labels = 'client="' + "c" * 24 + '",symbol="ETH"'
    for line in (
        f"walletcore_desk_balance{{{labels}}} 0.5",
        f"walletcore_desk_owed{{{labels}}} 0.8",
        f"walletcore_desk_incoming{{{labels}}} 0.25",
        f"walletcore_desk_mismatches{{{labels}}} 1.0",
        f"walletcore_desk_deliveries_paused{{{labels}}} 1.0",
    ):
        assert line in text
    assert 'walletcore_desk_deliveries_paused{client="' + "c" * 24 + '",symbol="USDT"} 0.0' in text
    assert 'walletcore_desk_balance{client="' + "c" * 24 + '",symbol="USDT"}' not in text
