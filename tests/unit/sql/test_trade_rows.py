"""Trades from their stored rows (`walletcore_sql.rows.TradeRows`): a terminal trade is built
once per database and reused while its row is the one it was built from; every other trade
is built from its row every time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from walletcore.domain.trade import TradeStatus
from walletcore_sql import rows
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage

NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def row(trade_id: str = "a" * 24, status: str = "completed", **changes: Any) -> dict[str, Any]:
    terminal = status in {s.value for s in TradeStatus if s.is_terminal}
    settled = status == "completed"
    base: dict[str, Any] = {
        "trade_id": trade_id,
        "client_id": "c" * 24,
        "user_id": "u" * 24,
        "side": "sell",
        "status": status,
        "asset_id": 1,
        "symbol": "BTC",
        "fiat": "USD",
        "fixed_leg": "crypto",
        "quote_crypto_amount": Decimal("0.01"),
        "quote_fiat_amount": Decimal("600.12"),
        "quote_price": Decimal(60012),
        "quote_expires_at": NOW + timedelta(minutes=1),
        "approved_crypto_amount": Decimal("0.01") if settled else None,
        "approved_fiat_amount": Decimal("600.12") if settled else None,
        "approved_price": Decimal(60012) if settled else None,
        "executed_crypto_amount": Decimal("0.01") if settled else None,
        "executed_fiat_amount": Decimal("600.10") if settled else None,
        "executed_price": Decimal(60010) if settled else None,
        "reference": "venue-1" if settled else None,
        "failure_reason": None,
        "created_at": NOW,
        "approved_at": NOW + timedelta(seconds=5) if settled else None,
        "completed_at": NOW + timedelta(seconds=6) if terminal else None,
    }
    return {**base, **changes}


@pytest.mark.parametrize("status", ["completed", "failed", "expired", "cancelled"])
def test_a_terminal_trade_is_built_once_and_is_its_row(status: str) -> None:
    trade_rows = rows.TradeRows()
    first = trade_rows(row(status=status))
    assert first == rows.trade_from(row(status=status))  # the same trade as built alone
    assert first.status is TradeStatus(status)
    assert trade_rows(row(status=status)) is first


@pytest.mark.parametrize("status", ["open", "approved", "executing"])
def test_a_trade_that_may_still_move_is_built_every_time(status: str) -> None:
    trade_rows = rows.TradeRows()
    first = trade_rows(row(status=status))
    again = trade_rows(row(status=status))
    assert again == first and again is not first
    assert trade_rows(row(status=status, symbol="ETH")).symbol == "ETH"  # what the row says


def test_a_row_that_is_not_the_one_built_from_is_built_anew() -> None:
    trade_rows = rows.TradeRows()
    completed = trade_rows(row())
    # the same id in another status, completed at another instant, or of another owner
    failed = trade_rows(row(status="failed", failure_reason="rejected"))
    assert failed.status is TradeStatus.FAILED and failed.failure_reason == "rejected"
    later = trade_rows(row(completed_at=NOW + timedelta(seconds=9)))
    assert later is not completed and later.completed_at == NOW + timedelta(seconds=9)
    other = trade_rows(row(completed_at=NOW + timedelta(seconds=9), user_id="v" * 24))
    assert other.user_id == "v" * 24
    assert trade_rows(row(completed_at=NOW + timedelta(seconds=9), user_id="v" * 24)) is other


def test_the_oldest_go_past_the_bound() -> None:
    trade_rows = rows.TradeRows(size=2)
    first = trade_rows(row("1" * 24))
    second = trade_rows(row("2" * 24))
    assert trade_rows(row("1" * 24)) is first
    trade_rows(row("3" * 24))  # the oldest, "1", goes
    assert trade_rows(row("2" * 24)) is second
    assert trade_rows(row("1" * 24)) is not first


@pytest.mark.parametrize(
    "column", ["status", "side", "fiat", "fixed_leg"], ids=lambda c: f"unknown-{c}"
)
def test_a_value_no_enum_has_is_refused(column: str) -> None:
    with pytest.raises(ValueError):
        rows.TradeRows()(row(**{column: "bogus"}))


def test_each_database_keeps_its_own(tmp_path: Any) -> None:
    one = SqlStorage(sqlite_url(tmp_path / "one.db"), migrate=True)
    two = SqlStorage(sqlite_url(tmp_path / "two.db"), migrate=True)
    assert one.trade_rows is not two.trade_rows
    built = one.trade_rows(row())
    assert two.trade_rows(row()) is not built
