"""`Trade._to`: a move built directly is, field for field, what `dataclasses.replace`
made (docs/performance.md, "Fewer Python calls per request"), for every transition of
the table."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from walletcore.domain.assets import Fiat
from walletcore.domain.trade import (
    MOVED_FIELDS,
    Accepted,
    Figures,
    Fill,
    FixedLeg,
    Quote,
    Side,
    Trade,
    TradeStatus,
)

S = TradeStatus
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

amounts = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(10**9), places=6)
figures = st.builds(Figures, st.none() | amounts, st.none() | amounts, amounts)
instants = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1), timezones=st.just(UTC)
)
texts = st.none() | st.text(min_size=1, max_size=12)


@st.composite
def trades(draw: st.DrawFn) -> Trade:
    created = draw(instants)
    return Trade(
        trade_id=draw(st.text("0123456789abcdef", min_size=24, max_size=24)),
        client_id=draw(st.text("0123456789abcdef", min_size=24, max_size=24)),
        user_id=draw(st.text("0123456789abcdef", min_size=24, max_size=24)),
        side=draw(st.sampled_from(Side)),
        asset_id=draw(st.integers(1, 20)),
        symbol=draw(st.sampled_from(["BTC", "ETH", "USDT"])),
        fiat=draw(st.sampled_from(Fiat)),
        fixed_leg=draw(st.sampled_from(FixedLeg)),
        quote=Quote(
            draw(st.none() | amounts),
            draw(st.none() | amounts),
            draw(amounts),
            created + timedelta(seconds=draw(st.integers(1, 600))),
        ),
        status=draw(st.sampled_from(S)),
        created_at=created,
        approved_at=draw(st.none() | instants),
        completed_at=draw(st.none() | instants),
        approved=draw(st.none() | figures),
        executed=draw(st.none() | figures),
        reference=draw(texts),
        failure_reason=draw(texts),
    )


def same(a: Trade, b: Trade) -> bool:
    """Equal, and each field the very same object (`_to` copies references, as replace)."""
    return all(getattr(a, f.name) is getattr(b, f.name) for f in fields(Trade))


def test_the_fields_are_those_the_direct_build_names_in_order() -> None:
    """`_to` passes the fields by position: a field added, removed or moved must be
    added to it too (this fails until then)."""
    assert [f.name for f in fields(Trade)] == [
        "trade_id",
        "client_id",
        "user_id",
        "side",
        "asset_id",
        "symbol",
        "fiat",
        "fixed_leg",
        "quote",
        "status",
        "created_at",
        *MOVED_FIELDS[1:],
        "settlement",
    ]
    assert MOVED_FIELDS[0] == "status"


@given(trades(), st.sampled_from(S), st.data())
def test_a_move_is_what_replace_makes(
    trade: Trade, status: TradeStatus, data: st.DataObject
) -> None:
    values = {
        "approved_at": st.none() | instants,
        "completed_at": st.none() | instants,
        "approved": st.none() | figures,
        "executed": st.none() | figures,
        "reference": texts,
        "failure_reason": texts,
    }
    names = data.draw(st.sets(st.sampled_from(sorted(values))))
    changes = {name: data.draw(values[name]) for name in names}
    moved = trade._to(status, **changes)  # type: ignore[arg-type]
    assert same(moved, replace(trade, status=status, **changes))  # type: ignore[arg-type]
    assert moved == replace(trade, status=status, **changes)  # type: ignore[arg-type]


@given(trades(), instants, figures, texts, st.text(min_size=1, max_size=20))
def test_every_transition_as_replace_made_it(
    trade: Trade, now: datetime, fill_figures: Figures, reference: str | None, reason: str
) -> None:
    """Each transition against its former `replace` form, written out here."""
    open_ = replace(trade, status=S.OPEN)
    live = open_.quote.expires_at - timedelta(microseconds=1)
    if trade.created_at <= live:
        assert same(
            open_.start_approval(live),
            replace(open_, status=S.EXECUTING, approved_at=live),
        )
    for flying in (S.EXECUTING, S.APPROVED):
        t = replace(trade, status=flying)
        fill = Fill(fill_figures, reference)
        assert same(
            t.settle(fill, now),
            replace(
                t,
                status=S.COMPLETED,
                approved=t.approved or fill.figures,
                executed=fill.figures,
                completed_at=now,
                reference=fill.reference or t.reference,
            ),
        )
        assert same(
            t.fail(reason, now),
            replace(t, status=S.FAILED, failure_reason=reason, completed_at=now),
        )
    executing = replace(trade, status=S.EXECUTING)
    accepted = Accepted(fill_figures, reference)
    assert same(
        executing.accept(accepted),
        replace(
            executing,
            status=S.APPROVED,
            approved=accepted.figures,
            reference=accepted.reference or executing.reference,
        ),
    )
    assert same(executing.reopen(), replace(executing, status=S.OPEN, approved_at=None))
    assert same(
        open_.expire(now), replace(open_, status=S.EXPIRED, completed_at=open_.quote.expires_at)
    )
    approved = replace(trade, status=S.APPROVED)
    assert same(approved.expire(now), replace(approved, status=S.EXPIRED, completed_at=now))
    assert same(open_.cancel(now), replace(open_, status=S.CANCELLED, completed_at=now))


# -- Figures.kept: the places every store keeps, nothing built when nothing is cut ---------
long_amounts = st.decimals(
    min_value=Decimal("0.000001"), max_value=Decimal(10**9), places=24, allow_nan=False
)
long_figures = st.builds(Figures, st.none() | long_amounts, st.none() | long_amounts, long_amounts)


@given(long_figures)
def test_kept_figures_are_cut_to_the_stores_places_and_the_same_when_nothing_is_cut(
    given_figures: Figures,
) -> None:
    from walletcore.domain.money import keep_places

    kept = given_figures.kept()
    crypto, fiat = given_figures.crypto_amount, given_figures.fiat_amount
    assert kept.crypto_amount == (None if crypto is None else keep_places(crypto))
    assert kept.fiat_amount == (None if fiat is None else keep_places(fiat))
    assert kept.price == keep_places(given_figures.price)
    unchanged = all(
        value is None or keep_places(value) is value
        for value in (crypto, fiat, given_figures.price)
    )
    assert (kept is given_figures) == unchanged
    assert kept.kept() is kept  # what is kept has nothing more to cut


@given(long_figures, texts, st.sampled_from([Fill, Accepted]))
def test_a_venues_outcome_is_kept_as_it_is_unless_its_figures_are_cut(
    given_figures: Figures, reference: str | None, kind: type[Fill | Accepted]
) -> None:
    from walletcore.services.trading import _kept

    outcome = kind(given_figures, reference)
    kept = _kept(outcome)
    assert kept == replace(outcome, figures=given_figures.kept())  # what `replace` made
    assert type(kept) is kind
    assert (kept is outcome) == (given_figures.kept() is given_figures)
