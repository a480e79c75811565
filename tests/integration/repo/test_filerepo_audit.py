"""The sandbox file repo's audit log: the entries a change carries are in the data file's
commit, and reach the JSON-lines log even when the process dies between the two writes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from walletcore.domain.assets import Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.sandbox.filerepo import AUDIT_FILE, FileRepo

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs in this process."""


def _trade() -> Trade:
    return Trade(
        trade_id=new_id(),
        client_id=new_id(),
        user_id=new_id(),
        side=Side.SELL,
        asset_id=2,
        symbol="ETH",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal(1), Decimal(3000), Decimal(3000), T0 + timedelta(minutes=1)),
        status=TradeStatus.OPEN,
        created_at=T0,
    )


def _entry(action: str) -> AuditEntry:
    return AuditEntry(T0, None, action, "req-1", "ok")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "sandbox-repo.json"


def _dying_repo(path: Path, keep: int | None) -> FileRepo:
    """A repo whose process dies while appending the carried lines, after writing `keep`
    bytes of them (None: before writing any)."""

    class Dying(FileRepo):
        def _append(self, data: bytes) -> None:
            if keep:
                super()._append(data[:keep])
            raise Killed()

    return Dying(path)


@pytest.mark.parametrize("keep", [None, 7], ids=["before the append", "mid-append"])
async def test_a_change_committed_without_its_log_lines_gets_them_later(
    path: Path, keep: int | None
) -> None:
    setup = FileRepo(path)
    await setup.append_audit(_entry("before"))
    trade = _trade()
    await setup.add_trade(trade)
    executing = trade.start_approval(T0)

    with pytest.raises(Killed):
        await _dying_repo(path, keep).swap_trade(
            TradeStatus.OPEN, executing, audit=[_entry("trade.approve")]
        )

    restarted = FileRepo(path)  # a new process
    stored = await restarted.get_trade(trade.client_id, trade.user_id, trade.trade_id)
    assert stored is not None and stored.status is TradeStatus.EXECUTING  # committed
    assert [e.action for e in await restarted.list_audit()] == ["trade.approve", "before"]
    # Later writers keep one copy of it, in order.
    await restarted.append_audit(_entry("after"))
    done = executing.fail("no", T0)
    assert await restarted.swap_trade(TradeStatus.EXECUTING, done, audit=[_entry("settle")])
    assert [e.action for e in await FileRepo(path).list_audit()] == [
        "settle",
        "after",
        "trade.approve",
        "before",
    ]
    lines = (path.with_name(AUDIT_FILE)).read_bytes().splitlines()
    assert [json.loads(line)["action"] for line in lines] == [
        "before",
        "trade.approve",
        "after",
        "settle",
    ]


async def test_a_change_that_never_committed_leaves_no_line(path: Path) -> None:
    """Killed before the data file was replaced: neither the change nor its entry."""
    setup = FileRepo(path)
    trade = _trade()
    await setup.add_trade(trade)

    class DiesBeforeCommit(FileRepo):
        pass

    dying = DiesBeforeCommit(path)

    def write(state: object) -> None:
        raise Killed()

    dying._file._write = write  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await dying.swap_trade(TradeStatus.OPEN, trade.cancel(T0), audit=[_entry("cancel")])
    restarted = FileRepo(path)
    assert await restarted.get_trade(trade.client_id, trade.user_id, trade.trade_id) == trade
    assert await restarted.list_audit() == []


async def test_an_unreadable_line_is_skipped(path: Path) -> None:
    repo = FileRepo(path)
    await repo.add_client(ApiClient(new_id(), "a", "00" * 32), audit=[_entry("one")])
    fd = os.open(path.with_name(AUDIT_FILE), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b'{"at": "torn')  # a standalone append cut by a crash
    finally:
        os.close(fd)
    restarted = FileRepo(path)
    assert [e.action for e in await restarted.list_audit()] == ["one"]
    # Lines after it are whole, standalone or carried.
    await restarted.append_audit(_entry("two"))
    await restarted.add_client(ApiClient(new_id(), "b", "00" * 32), audit=[_entry("three")])
    assert [e.action for e in await FileRepo(path).list_audit()] == ["three", "two", "one"]
