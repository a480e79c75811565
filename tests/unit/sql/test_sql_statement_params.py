"""The parameters of the write path's PostgreSQL statements, built in one step each
(`walletcore_sql.stores`): the audited compare-and-set with the entry's event
(`audited_swap`, `TRADE_SWAP_AUDITED`), the quote with its entry as one statement (`TRADE_ADD_AUDITED`,
and `statements.combined` in a unit). Each must bind exactly what its statement names, with
the values the stores' own row dicts hold: a name missing would be filled in as NULL, not refused.
A statement sent positionally (`direct.Positional`) sends each value to its own bind."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from walletcore.domain.audit import AuditEntry
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.trade import TradeStatus
from walletcore_sql import direct, rows, stores
from walletcore_sql.direct import plans
from walletcore_sql.direct.plans import plan_of
from walletcore_sql.stores import statements
from walletcore_sql.stores import trades as trade_store
from walletcore_sql.tables import audit_log, events, trades

from .test_trade_rows import row

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
DIALECT = asyncpg_dialect()


NOTE = EventNote(EventType.TRADE_APPROVED, {"tradeId": "a" * 24, "price": "60120"})


def entry(detail: str | None = "open -> executing", event: EventNote | None = None) -> AuditEntry:
    return AuditEntry(
        at=NOW,
        client_id="c" * 24,
        action="trade.approve",
        request_id="r" * 24,
        outcome="ok",
        user_id="u" * 24,
        target="a" * 24,
        detail=detail,
        event=event,
    )


def bind_names(statement: Any, parameters: dict[str, Any]) -> set[str]:
    plan = plan_of(statement, DIALECT, parameters)
    assert plan is not None
    return {name for name, _ in plan.binds}


def renamed(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {f"{prefix}{key}": value for key, value in values.items()}


@pytest.mark.parametrize("status", [s.value for s in TradeStatus])
@pytest.mark.parametrize("detail", ["open -> executing", None])
@pytest.mark.parametrize("event", [NOTE, None], ids=["event", "no-event"])
def test_the_audited_swap_binds_the_move_the_row_the_entry_and_its_event(
    status: str, detail: str | None, event: EventNote | None
) -> None:
    trade = rows.trade_from(row(status=status, failure_reason="no" if status == "failed" else None))
    note = entry(detail, event)
    statement, params = stores.audited_swap(TradeStatus.OPEN, trade, note)
    # the same values as the move's, the entry's and the event's own row dicts, renamed
    published = rows.entry_event_values(note)
    assert params == {
        **renamed(rows.trade_move_values(trade), "s_"),
        "b_trade_id": trade.trade_id,
        "b_expected": "open",
        **renamed(rows.audit_values(note), "a_"),
        "e_type": None if published is None else published["type"],
        "e_data": None if published is None else published["data"],
    }
    if published is not None:  # the event's client, user and time are the entry's
        assert {k: published[k] for k in ("client_id", "user_id", "at")} == {
            k: params[f"a_{k}"] for k in ("client_id", "user_id", "at")
        }
        assert (params["e_type"], params["e_data"]) == ("trade.approved", dict(NOTE.data))
    assert statement is trade_store._TRADE_SWAP_AUDITED
    assert set(params) == bind_names(statement, params)


def test_the_audited_swap_inserts_the_event_only_from_a_matched_row_that_carries_one() -> None:
    """The event's INSERT is a CTE that selects from the UPDATE's returned row, and only
    when `e_type` is bound (an entry without an event binds it null)."""
    plan = stores.TRADE_SWAP_AUDITED.plan(DIALECT)[0]
    published = plan.sql[plan.sql.index("published AS") : plan.sql.index(" INSERT INTO audit_log")]
    assert "INSERT INTO events (client_id, user_id, type, at, data)" in published
    assert "FROM swapped" in published and "IS NOT NULL" in published
    assert rows.entry_event_row(entry()) == rows.NO_EVENT == (None, None)
    with pytest.raises(TypeError, match="client"):
        rows.entry_event_row(AuditEntry(NOW, None, "x", "r", "ok", event=NOTE))


def test_the_audited_swap_binds_every_column_a_move_changes() -> None:
    _, params = stores.audited_swap(TradeStatus.OPEN, rows.trade_from(row()), entry())
    moved = {key.removeprefix("s_") for key in params if key.startswith("s_")}
    assert moved == set(rows.TRADE_MOVE_COLUMNS)


def test_a_quote_and_its_entry_bind_each_insert_s_values() -> None:
    trade = rows.trade_from(row(status="open"))
    quote, note = rows.trade_values(trade), rows.audit_values(entry())
    statement, params = statements.combined([(trades, quote), (audit_log, note)])
    assert params == {**renamed(quote, "p0_"), **renamed(note, "p1_")}
    assert set(params) == bind_names(statement, params)
    # the statement is built once per shape
    again, _ = statements.combined([(trades, dict(quote)), (audit_log, dict(note))])
    assert again is statement


@given(st.permutations(sorted(rows.audit_values(entry()))))
def test_the_values_go_to_their_binds_in_any_order_of_their_names(order: list[str]) -> None:
    """A shape is keyed by the names in order: any order binds each value to its column."""
    trade = rows.trade_from(row(status="open"))
    quote = rows.trade_values(trade)
    note = {key: rows.audit_values(entry())[key] for key in order}
    note["detail"] = f"detail {order}"
    statement, params = statements.combined([(trades, quote), (audit_log, note)])
    assert params == {**renamed(quote, "p0_"), **renamed(note, "p1_")}
    plan = plan_of(statement, DIALECT, params)
    assert plan is not None
    sent = dict(zip([name for name, _ in plan.binds], plan.arguments(params), strict=True))
    assert sent["p1_detail"] == f"detail {order}"
    assert sent["p0_quote_crypto_amount"] == Decimal("0.01")
    assert sent["p0_quote_expires_at"] == trade.quote.expires_at


def test_a_table_that_comes_twice_is_not_combined() -> None:
    note = rows.audit_values(entry())
    assert statements.combined([(audit_log, note), (audit_log, dict(note))]) == (None, {})
    # the second time from the shapes already seen
    assert statements.combined([(audit_log, note), (audit_log, dict(note))]) == (None, {})


def test_one_insert_is_the_table_s_own() -> None:
    note = rows.audit_values(entry())
    statement, params = statements.combined([(audit_log, note)])
    assert statement is statements.INSERTS["audit_log"] and params is note


def test_a_plan_is_the_same_sql_whatever_the_order_of_its_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a cache of its own: a test process compiles more statements than the bound keeps
    monkeypatch.setattr(plans, "_PLANS", {})
    note = rows.audit_values(entry())
    backwards = dict(reversed(list(note.items())))
    statement = statements.INSERTS["audit_log"]
    plan, other = (
        plan_of(statement, DIALECT, note),
        plan_of(statement, DIALECT, backwards),
    )
    assert plan is not None and other is not None
    assert plan.sql == other.sql
    assert plan.arguments(note) == other.arguments(backwards)
    assert plan_of(statement, DIALECT, dict(note)) is plan  # cached per order


def test_a_moves_values_are_each_its_own_columns() -> None:
    """`rows.trade_move_row` gives values by position: each lands under its own column
    (every value here differs, so a swapped pair would show)."""
    trade = rows.trade_from(
        row(
            status="completed",
            approved_crypto_amount=Decimal("0.011"),
            approved_fiat_amount=Decimal("601.1"),
            approved_price=Decimal(60011),
            executed_crypto_amount=Decimal("0.012"),
            executed_fiat_amount=Decimal("601.2"),
            executed_price=Decimal(60012),
            failure_reason="reason",
        )
    )
    assert trade.approved is not None and trade.executed is not None
    assert rows.trade_move_values(trade) == {
        "status": "completed",
        "approved_crypto_amount": trade.approved.crypto_amount,
        "approved_fiat_amount": trade.approved.fiat_amount,
        "approved_price": trade.approved.price,
        "executed_crypto_amount": trade.executed.crypto_amount,
        "executed_fiat_amount": trade.executed.fiat_amount,
        "executed_price": trade.executed.price,
        "reference": trade.reference,
        "failure_reason": "reason",
        "approved_at": trade.approved_at,
        "completed_at": trade.completed_at,
    }
    assert rows.audit_row(entry()) == tuple(rows.audit_values(entry()).values())
    assert tuple(rows.audit_values(entry())) == rows.AUDIT_COLUMNS


# -- statements sent positionally (`direct.Positional`, `direct.execute_alone`) ------------
def sent_by_bind(statement: direct.Positional, values: tuple[Any, ...]) -> dict[str, Any]:
    """What `execute_alone` would send, by bind name: the plan's binds in its order, each
    with its value processed as the plan processes it."""
    plan, order = statement.plan(DIALECT)
    arguments = [values[n] if process is None else process(values[n]) for n, process in order]
    return dict(zip([name for name, _ in plan.binds], arguments, strict=True))


@pytest.mark.parametrize("status", [s.value for s in TradeStatus])
def test_the_positional_swap_sends_what_the_unit_s_swap_binds(status: str) -> None:
    trade = rows.trade_from(row(status=status, failure_reason="no" if status == "failed" else None))
    values = stores.audited_swap_values(TradeStatus.OPEN, trade, entry(event=NOTE))
    _, params = stores.audited_swap(TradeStatus.OPEN, trade, entry(event=NOTE))
    plan = plan_of(trade_store._TRADE_SWAP_AUDITED, DIALECT, params)
    assert plan is not None
    assert stores.TRADE_SWAP_AUDITED.plan(DIALECT)[0].sql == plan.sql
    by_name = dict(zip([name for name, _ in plan.binds], plan.arguments(params), strict=True))
    assert sent_by_bind(stores.TRADE_SWAP_AUDITED, values) == by_name


def test_the_quote_alone_sends_the_trade_s_row_and_the_entry() -> None:
    trade = rows.trade_from(row(status="open"))
    sent = sent_by_bind(stores.TRADE_ADD_AUDITED, stores.audited_add_values(trade, entry()))
    assert sent == {
        **renamed(rows.trade_values(trade), "p0_"),
        **renamed(rows.audit_values(entry()), "p1_"),
    }
    assert set(rows.TRADE_COLUMNS) == {c.name for c in trades.columns}
    assert set(rows.AUDIT_COLUMNS) == {c.name for c in audit_log.columns} - {"entry_id"}
    assert set(rows.EVENT_COLUMNS) == {c.name for c in events.columns} - {"seq", "tx"}


def test_a_quote_whose_entry_carries_an_event_is_not_sent_by_the_quote_alone() -> None:
    """`TRADE_ADD_AUDITED` writes no event: such a quote goes through a write unit
    (`SqlStorage.add_trade`), whose combined statement writes the event too."""
    trade = rows.trade_from(row(status="open"))
    with pytest.raises(ValueError, match="no event"):
        stores.audited_add_values(trade, entry(event=NOTE))
    quote, note = rows.trade_values(trade), rows.audit_values(entry())
    published = rows.entry_event_values(entry(event=NOTE))
    assert published is not None
    statement, params = statements.combined(
        [(trades, quote), (audit_log, note), (events, published)]
    )
    assert params == {**renamed(quote, "p0_"), **renamed(note, "p1_"), **renamed(published, "p2_")}
    assert set(params) == bind_names(statement, params)


def test_a_positional_statement_refuses_what_it_cannot_send() -> None:
    with pytest.raises(ValueError, match="twice"):
        direct.Positional(trade_store._TRADE_SWAP_AUDITED, ("a", "a"))
    missing = direct.Positional(
        trade_store._TRADE_SWAP_AUDITED, stores.TRADE_SWAP_AUDITED.names[:-1]
    )
    with pytest.raises(RuntimeError, match="no value"):
        missing.plan(DIALECT)
    assert stores.TRADE_SWAP_AUDITED.parameters(range(23)) == dict(
        zip(stores.TRADE_SWAP_AUDITED.names, range(23), strict=True)
    )
    with pytest.raises(ValueError):
        stores.TRADE_SWAP_AUDITED.parameters((1, 2))


async def test_a_positional_statement_with_the_wrong_count_of_values_sends_nothing() -> None:
    class NoPool:
        dialect = DIALECT

        def take_kept(self) -> None:
            raise AssertionError("no connection is taken for values that do not fit")

    with pytest.raises(ValueError, match="values expected"):
        await direct.execute_alone(NoPool(), stores.TRADE_SWAP_AUDITED, (1, 2))  # type: ignore[arg-type]


def test_a_batched_swap_sends_what_the_swap_alone_sends_and_returns_its_trade() -> None:
    """Group commit: each move of a batch binds exactly what it binds alone; the batch form
    only adds `RETURNING` of its trade id, which is how a move tells it matched."""
    batch = stores.TRADE_SWAP_AUDITED.batch
    assert batch is not None and batch.statement.names == stores.TRADE_SWAP_AUDITED.names
    trade = rows.trade_from(row(status="executing"))
    values = stores.audited_swap_values(TradeStatus.OPEN, trade, entry(event=NOTE))
    assert sent_by_bind(batch.statement, values) == sent_by_bind(stores.TRADE_SWAP_AUDITED, values)
    alone = stores.TRADE_SWAP_AUDITED.plan(DIALECT)[0]
    batched = batch.statement.plan(DIALECT)[0]
    numbered = re.compile(r"\$\d+")  # the same binds, numbered in another order
    head, returning = batched.sql.rsplit(" RETURNING ", 1)
    assert numbered.sub("$", head) == numbered.sub("$", alone.sql)
    # the RETURNING sends back the trade id bound, `b_trade_id`'s own number
    number = [name for name, _ in batched.binds].index("b_trade_id") + 1
    assert returning == f"${number}::VARCHAR AS trade_id"
    assert values[batch.key] == trade.trade_id
    assert batch.matched is not None and batch.matched([(trade.trade_id,)]) == {trade.trade_id}


def test_a_batched_quote_is_the_quote_alone_keyed_by_its_trade() -> None:
    batch = stores.TRADE_ADD_AUDITED.batch
    assert batch is not None and batch.statement is stores.TRADE_ADD_AUDITED
    trade = rows.trade_from(row(status="open"))
    assert stores.audited_add_values(trade, entry())[batch.key] == trade.trade_id
    assert batch.matched is None  # every quote of a batch is stored, or the batch fails


def test_a_batch_form_must_bind_the_statement_s_names_in_order() -> None:
    other = direct.Positional(
        trade_store._TRADE_SWAP_AUDITED, tuple(reversed(trade_store._SWAP_NAMES))
    )
    with pytest.raises(ValueError, match="batch form"):
        direct.Positional(
            trade_store._TRADE_SWAP_AUDITED,
            trade_store._SWAP_NAMES,
            batch=direct.Batch(other, key=0),
        )
