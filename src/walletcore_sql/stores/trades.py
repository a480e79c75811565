"""`TradeStore` on SQL: quotes and trades, and the statements that move a trade or store
a quote with its audit entry as one (PostgreSQL's fast path, group commit included).

`swap` is one `UPDATE ... WHERE trade_id AND status = expected` (rowcount 1 wins; a
loser's UPDATE matches no row and writes nothing); on PostgreSQL's fast path, with its
entry and the entry's event, one statement (`TRADE_SWAP_AUDITED`: the entry and the event
are inserted from the UPDATE's returned row, so neither is written unless it matched). `lapsed` is one read of the partial index
`ix_trades_open_expiry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, insert, select, text, update

from walletcore.domain.audit import AuditEntry
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.ports.storage import TradeStore
from walletcore_sql import rows
from walletcore_sql.direct.plans import Batch, Positional
from walletcore_sql.stores.statements import bind, build_combined
from walletcore_sql.tables import audit_log, events, trades

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_TRADE_GET = select(trades).where(
    trades.c.trade_id == bind("trade_id"),
    trades.c.client_id == bind("client_id"),
    trades.c.user_id == bind("user_id"),
)
_TRADE_SWAP = update(trades).where(
    trades.c.trade_id == bind("trade_id"), trades.c.status == bind("expected")
)
#: The bind of each moved column in `_TRADE_SWAP_AUDITED`.
_SWAP_SET_NAMES = {name: f"s_{name}" for name in rows.TRADE_MOVE_COLUMNS}
#: The entry's binds (`a_<column>`), and the event's own (`e_type`, `e_data`: its client,
#: user and time are the entry's).
_ENTRY_BINDS = {
    name: bindparam(f"a_{name}", type_=audit_log.c[name].type) for name in rows.AUDIT_COLUMNS
}
_EVENT_TYPE = bindparam("e_type", type_=events.c.type.type)
_EVENT_DATA = bindparam("e_data", type_=events.c.data.type)
_SWAPPED = (
    _TRADE_SWAP.values(
        {name: bindparam(bind, type_=trades.c[name].type) for name, bind in _SWAP_SET_NAMES.items()}
    )
    .returning(trades.c.trade_id)
    .cte("swapped")
)
#: The entry's event, inserted only when the move matched (a row of `swapped`) and the
#: entry carries one (`e_type` not null): a data-modifying CTE of the same statement.
_PUBLISHED = (
    insert(events)
    .from_select(
        list(rows.EVENT_COLUMNS),
        select(
            _ENTRY_BINDS["client_id"].label("client_id"),
            _ENTRY_BINDS["user_id"].label("user_id"),
            _EVENT_TYPE.label("type"),
            _ENTRY_BINDS["at"].label("at"),
            _EVENT_DATA.label("data"),
        )
        .select_from(_SWAPPED)
        .where(_EVENT_TYPE.is_not(None)),
    )
    .cte("published")
)
_TRADE_SWAP_AUDITED = (
    insert(audit_log)
    .from_select(
        list(rows.AUDIT_COLUMNS),
        select(*[bind.label(name) for name, bind in _ENTRY_BINDS.items()]).select_from(_SWAPPED),
    )
    .add_cte(_PUBLISHED)
)


_SWAP_NAMES = (
    *_SWAP_SET_NAMES.values(),
    "b_trade_id",
    "b_expected",
    *(f"a_{name}" for name in rows.AUDIT_COLUMNS),
    "e_type",
    "e_data",
)


def _swapped(found: Sequence[Any]) -> set[Any]:
    """The trades of a batch of swaps that moved (`direct.GroupCommit`): each swap that
    matched returns the trade id it was given (`b_trade_id`), once."""
    return {row[0] for row in found}


#: `_TRADE_SWAP_AUDITED` with its binds in the order `audited_swap_values` gives their
#: values: the columns a move can change (`rows.trade_move_row`, as `s_<column>`), the row
#: and the status it must still have (`b_trade_id`, `b_expected`), the entry
#: (`rows.audit_row`, as `a_<column>`) and its event (`rows.entry_event_row`: `e_type`,
#: `e_data`, both null when it carries none).
TRADE_SWAP_AUDITED = Positional(
    _TRADE_SWAP_AUDITED,
    _SWAP_NAMES,
    # in a batch, each swap that matched returns its trade's id (the bind it was given)
    batch=Batch(
        Positional(
            _TRADE_SWAP_AUDITED.returning(
                bindparam("b_trade_id", type_=trades.c.trade_id.type).label("trade_id")
            ),
            _SWAP_NAMES,
        ),
        key=_SWAP_NAMES.index("b_trade_id"),
        matched=_swapped,
    ),
)


def audited_swap_values(expected: TradeStatus, trade: Trade, entry: AuditEntry) -> tuple[Any, ...]:
    """The values of `TRADE_SWAP_AUDITED`: the compare-and-set `expected` -> `trade` with
    its entry and the entry's event, one PostgreSQL statement; it matched a row when its
    rowcount is 1 (the entry's insert: the event's CTE does not count).
    `SqlStorage.swap_trade` sends it alone (`Database.run_alone`: autocommitted, no unit
    of stores around it); `SqlTrades.swap` in its unit (`audited_swap`)."""
    return (
        *rows.trade_move_row(trade),
        trade.trade_id,
        expected._value_,
        *rows.audit_row(entry),
        *rows.entry_event_row(entry),
    )


def audited_swap(
    expected: TradeStatus, trade: Trade, entry: AuditEntry
) -> tuple[Any, dict[str, Any]]:
    """`TRADE_SWAP_AUDITED` and its parameters by bind name, as a unit's `execute` takes
    them (`SqlTrades.swap`)."""
    values = audited_swap_values(expected, trade, entry)
    return TRADE_SWAP_AUDITED.statement, TRADE_SWAP_AUDITED.parameters(values)


def audited_add_values(trade: Trade, entry: AuditEntry) -> tuple[Any, ...]:
    """The values of `TRADE_ADD_AUDITED`: `trade`'s row, then `entry`'s. The statement
    writes no event: an entry that carries one goes through a write unit
    (`SqlStorage.add_trade`)."""
    if entry.event is not None:
        raise ValueError("TRADE_ADD_AUDITED writes no event: use a write unit")
    return (*rows.trade_row(trade), *rows.audit_row(entry))


_TRADE_LAPSED = select(trades).where(
    trades.c.client_id == bind("client_id"),
    trades.c.user_id == bind("user_id"),
    # A literal, not a bound value: the planner proves `ix_trades_open_expiry`'s partial
    # condition only from the literal (SQLite always, PostgreSQL under a generic plan).
    text("trades.status = 'open'"),
    trades.c.quote_expires_at <= bind("now"),
)

# `ix_trades_in_flight`'s partial condition, as a literal for the same reason.
_TRADE_IN_FLIGHT = (
    select(trades)
    .where(text("trades.status IN ('approved', 'executing')"))
    .order_by(trades.c.created_at, trades.c.trade_id)
    .limit(bind("limit"))
)


def _trade_page(by_side: bool, by_status: bool) -> Any:
    query = select(trades).where(
        trades.c.client_id == bind("client_id"), trades.c.user_id == bind("user_id")
    )
    if by_side:
        query = query.where(trades.c.side == bind("side"))
    if by_status:
        query = query.where(trades.c.status == bind("status"))
    order = (trades.c.created_at.desc(), trades.c.trade_id.desc())
    return query.order_by(*order).limit(bind("limit"))


_TRADE_PAGES = {
    (side, status): _trade_page(side, status) for side in (False, True) for status in (False, True)
}

#: A quote and its entry as one PostgreSQL statement: what a write unit of `trades.add` and
#: `audit.append` sends (`SqlUnit.flush`, `statements.combined`), built by the same builder,
#: with its binds in `audited_add_values`' order: the trade's row (`rows.trade_row`, as
#: `p0_<column>`), then the entry (`rows.audit_row`, as `p1_<column>`).
#: `SqlStorage.add_trade` sends it alone, or in a batch of such quotes (group commit: the
#: same statement once for each; the batch stores every quote or none).
TRADE_ADD_AUDITED = Positional(
    *build_combined(
        [
            (trades, dict.fromkeys(rows.TRADE_COLUMNS)),
            (audit_log, dict.fromkeys(rows.AUDIT_COLUMNS)),
        ]
    )
)
TRADE_ADD_AUDITED.batch = Batch(TRADE_ADD_AUDITED, key=TRADE_ADD_AUDITED.names.index("p0_trade_id"))


class SqlTrades(TradeStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, trade: Trade) -> None:
        self._unit.defer(trades, rows.trade_values(trade))

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        params = {"b_trade_id": trade_id, "b_client_id": client_id, "b_user_id": user_id}
        row = await self._unit.one(_TRADE_GET, params)
        return None if row is None else self._unit.trade_rows(row)

    async def page(
        self,
        client_id: str,
        user_id: str,
        *,
        side: Side | None,
        status: TradeStatus | None,
        limit: int,
    ) -> list[Trade]:
        params: dict[str, Any] = {
            "b_client_id": client_id,
            "b_user_id": user_id,
            "b_limit": max(limit, 0),
        }
        if side is not None:
            params["b_side"] = side.value
        if status is not None:
            params["b_status"] = status.value
        query = _TRADE_PAGES[(side is not None, status is not None)]
        return [self._unit.trade_rows(r) for r in await self._unit.all(query, params)]

    async def swap(
        self,
        expected: TradeStatus,
        trade: Trade,
        *,
        entry: AuditEntry | None = None,
    ) -> bool:
        self._unit.writer()
        if entry is None or not self._unit.database.pg_direct:
            # what a move can change, and nothing else: the quote's own columns stay as stored
            values = rows.trade_move_values(trade)
            values["b_trade_id"] = trade.trade_id
            values["b_expected"] = expected.value
            swapped = (await self._unit.run(_TRADE_SWAP, values)).rowcount == 1
            if swapped and entry is not None:
                await self._unit.audit.append(entry)
            return bool(swapped)
        # PostgreSQL's fast path: the compare-and-set, its entry and the entry's event in one
        # statement; their INSERTs select from the UPDATE's row, so they add a row only when
        # that matched.
        result = await self._unit.run(*audited_swap(expected, trade, entry))
        return bool(result.rowcount == 1)

    async def lapsed(self, client_id: str, user_id: str, now: datetime) -> list[Trade]:
        params = {"b_client_id": client_id, "b_user_id": user_id, "b_now": now}
        return [self._unit.trade_rows(r) for r in await self._unit.all(_TRADE_LAPSED, params)]

    async def in_flight(self, limit: int) -> list[Trade]:
        found = await self._unit.all(_TRADE_IN_FLIGHT, {"b_limit": max(limit, 0)})
        return [self._unit.trade_rows(r) for r in found]
