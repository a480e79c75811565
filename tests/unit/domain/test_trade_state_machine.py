"""The Trade entity: every row of the spec's transition table, and the figures rules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import (
    InvalidRequest,
    QuoteLapsed,
    TradeNotApprovable,
    TradeNotCancellable,
)
from walletcore.domain.trade import (
    TERMINAL_STATUSES,
    Accepted,
    ApproveStep,
    Figures,
    Fill,
    FixedLeg,
    InvalidTransition,
    Quote,
    Side,
    Trade,
    TradeStatus,
    derive_figures,
    parse_side,
    parse_status,
)

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
EXPIRES = T0 + timedelta(seconds=60)
LIVE = T0 + timedelta(seconds=30)
LAPSED = EXPIRES + timedelta(seconds=1)
QUOTED = Figures(Decimal("0.5"), Decimal(32500), Decimal(65000))
CONFIRMED = Figures(Decimal("0.5"), Decimal("32600.5"), Decimal(65201))
EXECUTED = Figures(Decimal("0.5"), Decimal(32601), Decimal(65202))
S = TradeStatus


def a_trade(status: TradeStatus = S.OPEN, **changes: object) -> Trade:
    trade = Trade(
        trade_id="a" * 24,
        client_id="c" * 24,
        user_id="u" * 24,
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(QUOTED.crypto_amount, QUOTED.fiat_amount, QUOTED.price, EXPIRES),
        status=S.OPEN,
        created_at=T0,
    )
    if status is not S.OPEN:
        trade = replace(
            trade, status=status, approved_at=LIVE if status is not S.CANCELLED else None
        )
    if status in TERMINAL_STATUSES:
        trade = replace(trade, completed_at=LIVE)
    return replace(trade, **changes)  # type: ignore[arg-type]


# -- approve: the rows of the table ----------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "now", "step"),
    [
        (S.OPEN, LIVE, ApproveStep.PROCEED),  # open, quote not lapsed -> priced and executed
        (S.OPEN, LAPSED, ApproveStep.EXPIRE),  # open, quote lapsed -> expired, 409
        (S.OPEN, EXPIRES, ApproveStep.EXPIRE),  # the expiry instant itself is lapsed
        (S.APPROVED, LAPSED, ApproveStep.EXPIRE),  # approved never settled, lapsed -> expired
        (S.COMPLETED, LIVE, ApproveStep.REPLAY),  # completed, any -> 200 replayed
        (S.COMPLETED, LAPSED, ApproveStep.REPLAY),
    ],
)
def test_approve_steps(status: TradeStatus, now: datetime, step: ApproveStep) -> None:
    assert a_trade(status).approve_step(now) is step


@pytest.mark.parametrize(
    ("status", "now"),
    [
        (S.EXECUTING, LIVE),  # executing, any -> 409, poll
        (S.EXECUTING, LAPSED),
        (S.APPROVED, LIVE),  # being worked: never approve again
        (S.EXPIRED, LIVE),  # expired, failed, cancelled, any -> 409
        (S.EXPIRED, LAPSED),
        (S.FAILED, LIVE),
        (S.FAILED, LAPSED),
        (S.CANCELLED, LIVE),
        (S.CANCELLED, LAPSED),
    ],
)
def test_approve_refused_with_409(status: TradeStatus, now: datetime) -> None:
    with pytest.raises(TradeNotApprovable) as raised:
        a_trade(status).approve_step(now)
    assert raised.value.status == 409


def test_start_approval_moves_open_to_executing_and_stamps_approval() -> None:
    trade = a_trade()
    executing = trade.start_approval(LIVE)
    assert (executing.status, executing.approved_at) == (S.EXECUTING, LIVE)
    assert executing.completed_at is None
    assert executing.quote == trade.quote and trade.status is S.OPEN  # immutable


def test_start_approval_of_a_lapsed_quote_is_409() -> None:
    with pytest.raises(QuoteLapsed) as raised:
        a_trade().start_approval(LAPSED)
    assert raised.value.status == 409


@pytest.mark.parametrize("status", [s for s in S if s is not S.OPEN])
def test_start_approval_only_from_open(status: TradeStatus) -> None:
    with pytest.raises(InvalidTransition):
        a_trade(status).start_approval(LIVE)


@pytest.mark.parametrize("status", [S.EXECUTING, S.APPROVED])
def test_settle_completes_with_the_executed_figures(status: TradeStatus) -> None:
    trade = a_trade(status)
    done = trade.settle(Fill(EXECUTED, reference="REF-1"), LAPSED)
    assert done.status is S.COMPLETED and done.completed_at == LAPSED
    assert done.executed == EXECUTED and done.figures == EXECUTED
    assert done.reference == "REF-1"
    assert done.quote == trade.quote  # the quote stays as quoted


def test_settle_keeps_the_figures_confirmed_at_acceptance() -> None:
    approved = a_trade(S.EXECUTING).accept(Accepted(CONFIRMED, reference="REF-A"))
    done = approved.settle(Fill(EXECUTED), LAPSED)
    assert (done.approved, done.executed) == (CONFIRMED, EXECUTED)
    assert done.reference == "REF-A"  # a fill without a reference keeps the one known


@pytest.mark.parametrize("status", [S.OPEN, S.COMPLETED, S.FAILED, S.EXPIRED, S.CANCELLED])
def test_settle_refused_outside_flight(status: TradeStatus) -> None:
    with pytest.raises(InvalidTransition):
        a_trade(status).settle(Fill(EXECUTED), LIVE)


def test_accept_moves_executing_to_approved_with_confirmed_figures() -> None:
    approved = a_trade(S.EXECUTING).accept(Accepted(CONFIRMED))
    assert approved.status is S.APPROVED and approved.approved == CONFIRMED
    assert approved.completed_at is None
    with pytest.raises(InvalidTransition):
        a_trade(S.OPEN).accept(Accepted(CONFIRMED))


@pytest.mark.parametrize("status", [S.EXECUTING, S.APPROVED])
def test_fail_records_the_reason_and_ends_the_trade(status: TradeStatus) -> None:
    failed = a_trade(status).fail("insufficient liquidity", LAPSED)
    assert failed.status is S.FAILED and failed.failure_reason == "insufficient liquidity"
    assert failed.completed_at == LAPSED and failed.executed is None


@pytest.mark.parametrize("status", [S.OPEN, S.COMPLETED, S.EXPIRED, S.CANCELLED, S.FAILED])
def test_fail_refused_outside_flight(status: TradeStatus) -> None:
    with pytest.raises(InvalidTransition):
        a_trade(status).fail("x", LIVE)


def test_reopen_puts_an_unplaced_order_back_to_open() -> None:
    reopened = a_trade(S.EXECUTING).reopen()
    assert reopened.status is S.OPEN and reopened.approved_at is None
    with pytest.raises(InvalidTransition):
        a_trade(S.APPROVED).reopen()


def test_an_unapproved_quote_expires_at_the_instant_it_lapsed() -> None:
    expired = a_trade().expire(LAPSED + timedelta(hours=1))
    assert expired.status is S.EXPIRED
    assert expired.completed_at == EXPIRES and expired.approved_at is None


def test_an_approved_trade_expires_when_it_is_approved_again() -> None:
    expired = a_trade(S.APPROVED).expire(LAPSED)
    assert expired.status is S.EXPIRED and expired.completed_at == LAPSED
    assert expired.approved_at == LIVE


@pytest.mark.parametrize("status", [S.EXECUTING, S.COMPLETED, S.FAILED, S.CANCELLED, S.EXPIRED])
def test_expire_only_open_or_approved(status: TradeStatus) -> None:
    with pytest.raises(InvalidTransition):
        a_trade(status).expire(LAPSED)


def test_lapse_boundary() -> None:
    trade = a_trade()
    assert not trade.is_lapsed(EXPIRES - timedelta(microseconds=1))
    assert trade.is_lapsed(EXPIRES)
    assert trade.lapses_unapproved(EXPIRES)
    assert not a_trade(S.APPROVED).lapses_unapproved(LAPSED)  # only open quotes lapse on their own


# -- cancel ----------------------------------------------------------------------------------
def test_cancel_open() -> None:
    cancelled = a_trade().cancel(LIVE)
    assert cancelled.status is S.CANCELLED and cancelled.completed_at == LIVE


def test_cancel_cancelled_is_the_same_trade() -> None:
    cancelled = a_trade(S.CANCELLED)
    assert cancelled.cancel(LAPSED) is cancelled


@pytest.mark.parametrize("status", [S.APPROVED, S.EXECUTING, S.COMPLETED, S.FAILED, S.EXPIRED])
def test_cancel_anything_else_is_409(status: TradeStatus) -> None:
    with pytest.raises(TradeNotCancellable) as raised:
        a_trade(status).cancel(LIVE)
    assert raised.value.status == 409


# -- figures ---------------------------------------------------------------------------------
def test_best_known_figures() -> None:
    trade = a_trade()
    assert trade.figures == QUOTED
    approved = a_trade(S.EXECUTING).accept(Accepted(CONFIRMED))
    assert approved.figures == CONFIRMED
    assert approved.settle(Fill(EXECUTED), LAPSED).figures == EXECUTED


def test_order_holds_the_fixed_leg() -> None:
    by_fiat = a_trade(S.EXECUTING, fixed_leg=FixedLeg.FIAT)
    order = by_fiat.order(8)
    assert (order.fixed_leg, order.fixed_amount, order.decimals) == (
        FixedLeg.FIAT,
        Decimal(32500),
        8,
    )
    assert a_trade(S.EXECUTING).order(8).fixed_amount == Decimal("0.5")
    with pytest.raises(InvalidTransition):
        a_trade().order(8)  # no order before approval


PRICES = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal(1000000), places=8)
AMOUNTS = st.decimals(min_value=Decimal("0.01"), max_value=Decimal(100000000), places=2)


@given(AMOUNTS, PRICES, st.sampled_from([6, 8, 9, 18]))
def test_derive_from_fiat_never_gives_more_crypto_than_the_fiat_buys(
    fiat: Decimal, price: Decimal, decimals: int
) -> None:
    figures = derive_figures(FixedLeg.FIAT, fiat, price, decimals)
    assert figures.fiat_amount == fiat and figures.price == price
    crypto = figures.crypto_amount
    assert crypto is not None and -crypto.as_tuple().exponent <= decimals  # type: ignore[operator]
    with localcontext() as ctx:
        ctx.prec = 100
        assert crypto * price <= fiat
        assert (crypto + Decimal(1).scaleb(-decimals)) * price > fiat  # the largest such amount


@given(st.decimals(min_value=Decimal("0.00000001"), max_value=Decimal(100000), places=8), PRICES)
def test_derive_from_crypto_is_exact(crypto: Decimal, price: Decimal) -> None:
    with localcontext() as ctx:
        ctx.prec = 100
        exact = crypto * price
    figures = derive_figures(FixedLeg.CRYPTO, crypto, price, 8)
    assert figures == Figures(crypto, exact, price)  # no rounding at 28 digits either


def test_parse_side_and_status() -> None:
    assert parse_side(None) is None and parse_side("buy") is Side.BUY
    assert parse_status(None) is None and parse_status("executing") is S.EXECUTING
    for bad in ("BUY", "", "both", 1):
        with pytest.raises(InvalidRequest):
            parse_side(bad)
    for bad in ("OPEN", "pending", "", 0):
        with pytest.raises(InvalidRequest):
            parse_status(bad)
