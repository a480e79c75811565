"""The sandbox JSON-file Repo: the Repo contract, visibility across processes, no lost update.

It lives here because it exists for the binding (the CLI and `walletcore serve` share it).
The contract tests of tests/integration/repo are run against it too.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import multiprocessing
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from walletcore.domain.assets import Fiat
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.sandbox.filerepo import FileRepo, FileRepoError, build
from walletcore.settings import Profile, Settings

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

# -- the shared Repo contract, run against the file repo ------------------------------------
_CONTRACT = Path(__file__).resolve().parents[1] / "repo" / "test_repo_contract.py"
if _CONTRACT.exists():
    _spec = importlib.util.spec_from_file_location("walletcore_repo_contract", _CONTRACT)
    assert _spec is not None and _spec.loader is not None
    _contract = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_contract)
    # Its tests and module fixtures (client_id, user_id), with `repo` below.
    globals().update(
        {
            name: value
            for name, value in vars(_contract).items()
            if name.startswith("test_") or name in ("client_id", "user_id")
        }
    )


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[FileRepo]:
    yield FileRepo(tmp_path / "repo.json")


# -- what only a file repo has to prove ----------------------------------------------------
def client(name: str = "Acme") -> ApiClient:
    return ApiClient(client_id=new_id(), name=name, key_hash="0" * 64, created_at=T0)


def open_trade(client_id: str, user_id: str) -> Trade:
    return Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(
            Decimal("0.5"),
            Decimal("32500.123456789"),
            Decimal("65000.24691357"),
            T0 + timedelta(seconds=60),
        ),
        status=TradeStatus.OPEN,
        created_at=T0,
    )


async def test_a_second_instance_sees_changes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "repo.json"
    server, cli = FileRepo(path), FileRepo(path)
    assert await server.get_client("0" * 24) is None
    first = client()
    await cli.add_client(first)
    assert await server.get_client(first.client_id) == first
    for _ in range(5):  # quick successive writes are each seen (mtime strictly rises)
        newer = client()
        await cli.add_client(newer)
        assert await server.get_client(newer.client_id) == newer


async def test_compare_and_set_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "repo.json"
    a, b = FileRepo(path), FileRepo(path)
    trade = open_trade(new_id(), new_id())
    await a.add_trade(trade)
    executing = trade.start_approval(T0)
    results = await asyncio.gather(
        a.swap_trade(TradeStatus.OPEN, executing), b.swap_trade(TradeStatus.OPEN, executing)
    )
    assert sorted(results) == [False, True]


def _add_clients(path: str, count: int) -> None:
    async def run() -> None:
        repo = FileRepo(Path(path))
        for _ in range(count):
            await repo.add_client(client())

    asyncio.run(run())


async def test_concurrent_processes_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "repo.json"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_clients, args=(str(path), 15)) for _ in range(3)]
    for worker in workers:
        worker.start()
    await asyncio.gather(*(FileRepo(path).add_client(client()) for _ in range(15)))
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len(await FileRepo(path).list_clients()) == 60


async def test_values_on_disk_are_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "repo.json"
    repo = FileRepo(path)
    trade = open_trade(new_id(), new_id())
    await repo.add_trade(trade)
    data = json.loads(path.read_text())
    stored = data["trades"][0]
    assert stored["quote"]["fiat_amount"] == "32500.123456789"  # Decimals as strings
    assert stored["created_at"] == "2026-01-01T12:00:00+00:00"  # datetimes ISO, UTC
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert await FileRepo(path).get_trade(trade.client_id, trade.user_id, trade.trade_id) == trade


async def test_refusals_match_the_in_memory_repo(tmp_path: Path) -> None:
    repo = FileRepo(tmp_path / "repo.json")
    first = client()
    await repo.add_client(first)
    with pytest.raises(InvalidRequest):
        await repo.add_client(first)


async def test_a_corrupt_or_foreign_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "repo.json"
    path.write_text("{not json")
    with pytest.raises(FileRepoError, match="corrupt"):
        await FileRepo(path).list_clients()
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(FileRepoError, match="not a walletcore sandbox repo"):
        await FileRepo(path).list_clients()


def test_the_production_profile_refuses_it(tmp_path: Path) -> None:
    settings: Any = Settings(home=tmp_path, profile=Profile.PRODUCTION)
    with pytest.raises(FileRepoError):
        build(settings=settings)
    assert isinstance(build(settings=Settings(home=tmp_path)), FileRepo)
