"""`Services.trade_view`: a trade in a terminal status is formatted once per app; any other
trade is formatted every time (it may still change)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from walletcore.container import create_container
from walletcore.domain.assets import Fiat
from walletcore.domain.ids import new_id
from walletcore.domain.trade import Figures, FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.settings import Settings
from walletcore_litestar import services as services_module
from walletcore_litestar.schemas import TradeView
from walletcore_litestar.services import Services

T0 = datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def _trade(status: TradeStatus, **changes: object) -> Trade:
    trade = Trade(
        trade_id=new_id(),
        client_id=new_id(),
        user_id=new_id(),
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal("0.01"), Decimal("601.2345678"), Decimal("60123.45678"), T0),
        status=status,
        created_at=T0 - timedelta(minutes=1),
    )
    return replace(trade, **changes)  # type: ignore[arg-type]


@pytest.fixture
def services(tmp_path: Path) -> Services:
    return Services(create_container(Settings(home=tmp_path / "home", repo="memory")))


@pytest.mark.parametrize(
    "status",
    [TradeStatus.COMPLETED, TradeStatus.FAILED, TradeStatus.EXPIRED, TradeStatus.CANCELLED],
)
def test_a_terminal_trade_is_formatted_once(services: Services, status: TradeStatus) -> None:
    trade = _trade(status, completed_at=T0)
    first = services.trade_view(trade)
    assert first == TradeView.of(trade)
    assert services.trade_view(replace(trade)) is first  # the same trade read again


@pytest.mark.parametrize("status", [TradeStatus.OPEN, TradeStatus.APPROVED, TradeStatus.EXECUTING])
def test_a_trade_that_may_still_change_is_formatted_every_time(
    services: Services, status: TradeStatus
) -> None:
    trade = _trade(status)
    assert services.trade_view(trade) == TradeView.of(trade)
    # the same trade settled: the view shows it at once
    settled = replace(
        trade,
        status=TradeStatus.COMPLETED,
        executed=Figures(Decimal("0.01"), Decimal(600), Decimal(60000)),
        completed_at=T0,
    )
    view = services.trade_view(settled)
    assert (view.status, view.fiatAmount, view.completedAt) == (
        "completed",
        "600",
        "2026-05-06T07:08:09.123Z",
    )


def test_the_same_trade_id_of_another_user_is_not_served_from_the_cache(
    services: Services,
) -> None:
    trade = _trade(TradeStatus.COMPLETED, completed_at=T0)
    services.trade_view(trade)
    other = replace(trade, user_id=new_id(), fiat=Fiat.EUR)
    assert services.trade_view(other).fiat == "EUR"


def test_the_oldest_views_go_past_the_bound(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services_module, "TERMINAL_VIEWS_SIZE", 3)
    trades = [_trade(TradeStatus.EXPIRED, completed_at=T0) for _ in range(5)]
    views = [services.trade_view(t) for t in trades]
    assert services.trade_view(trades[-1]) is views[-1]  # kept
    assert services.trade_view(trades[0]) is not views[0]  # dropped, formatted again
    assert services.trade_view(trades[0]) == views[0]
