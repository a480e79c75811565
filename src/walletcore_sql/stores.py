"""The five stores of `SqlStorage`, each over the connection of one unit of work.

Rules:
- Every statement runs in the unit's transaction; the unit commits or rolls back.
- `TradeStore.swap` is one `UPDATE ... WHERE trade_id AND status = expected` (rowcount 1
  wins; a loser's UPDATE matches no row and writes nothing). `lapsed` is one read of the
  partial index `ix_trades_open_expiry`.
- `SendStore.begin` inserts the (client, X-Request-Id) row or locks the stored one
  (`FOR UPDATE`) and lets `SendRecord.claim` decide; `advance` is a compare-and-set on
  (state, attempt); `track` one on the chain status and transaction hash (its entry
  appended in the unit only when it matched); `following` one read of `ix_sends_following`.
- `ClientStore.add_auth_failures` and `.auth_succeeded` read the client's failure record
  `FOR UPDATE` (SQLite: under the write lock the unit holds) and write it back in place;
  `update` never writes those columns, so an operator's change keeps the counts.
- A write method in a read unit raises `RuntimeError` before any statement.
- Statements are built once, at import, with named bind parameters, and executed with the
  values as parameters: SQLAlchemy then reuses the compiled form without rebuilding the
  statement or its cache key per call (that cost more than SQLite ran the statement).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import chain
from typing import Any

from sqlalchemy import Table, bindparam, func, insert, select, text, update

from walletcore.domain.assets import Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, AuthFailures, User
from walletcore.domain.errors import InvalidRequest, InvalidSendTransition
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.prices import PriceRecords, StoredPrices
from walletcore.ports.storage import (
    AuditStore,
    ClientStore,
    SendStore,
    TradeStore,
    UnitOfWork,
    WalletStore,
)
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.direct import Batch, Positional
from walletcore_sql.tables import (
    SEND_FOLLOWED,
    api_clients,
    audit_log,
    price_records,
    send_hashes,
    sends,
    trades,
    users,
    wallets,
)


def _b(name: str) -> Any:
    return bindparam(f"b_{name}")


# -- statements, built once ----------------------------------------------------------------
_CLIENT_GET = select(api_clients).where(api_clients.c.client_id == _b("client_id"))
_CLIENT_ALL = select(api_clients).order_by(
    api_clients.c.created_at.asc().nulls_first(), api_clients.c.client_id
)
_CLIENT_KEY = api_clients.c.client_id == _b("client_id")
#: A client's failure record, locked for its change (`add_auth_failures`, `auth_succeeded`;
#: SQLite ignores FOR UPDATE: its write unit holds the database's write lock already).
_CLIENT_FAILURES_LOCK = (
    select(*[api_clients.c[name] for name in rows.CLIENT_AUTH_COLUMNS])
    .where(_CLIENT_KEY)
    .with_for_update()
)
_CLIENT_FAILURES_SET = update(api_clients).where(_CLIENT_KEY)
_USER_INSERT = users.insert()
_WALLET_INSERT = wallets.insert()
_USER_BY_REQUEST = select(users.c.user_id).where(
    users.c.client_id == _b("client_id"), users.c.request_id == _b("request_id")
)
_USER_GET = select(users).where(
    users.c.client_id == _b("client_id"), users.c.user_id == _b("user_id")
)
_WALLET_GET_USER = select(wallets).where(
    wallets.c.client_id == _b("client_id"),
    wallets.c.owner == _b("owner"),
    wallets.c.user_id == _b("user_id"),
)
_WALLET_GET_PLATFORM = select(wallets).where(
    wallets.c.client_id == _b("client_id"),
    wallets.c.owner == _b("owner"),
    wallets.c.user_id.is_(None),
)
_TRADE_GET = select(trades).where(
    trades.c.trade_id == _b("trade_id"),
    trades.c.client_id == _b("client_id"),
    trades.c.user_id == _b("user_id"),
)
_TRADE_SWAP = update(trades).where(
    trades.c.trade_id == _b("trade_id"), trades.c.status == _b("expected")
)
#: The bind of each moved column in `_TRADE_SWAP_AUDITED`.
_SWAP_SET_NAMES = {name: f"s_{name}" for name in rows.TRADE_MOVE_COLUMNS}
_TRADE_SWAP_AUDITED = insert(audit_log).from_select(
    list(rows.AUDIT_COLUMNS),
    select(
        *[
            bindparam(f"a_{name}", type_=audit_log.c[name].type).label(name)
            for name in rows.AUDIT_COLUMNS
        ]
    ).select_from(
        _TRADE_SWAP.values(
            {
                name: bindparam(bind, type_=trades.c[name].type)
                for name, bind in _SWAP_SET_NAMES.items()
            }
        )
        .returning(trades.c.trade_id)
        .cte("swapped")
    ),
)


_SWAP_NAMES = (
    *_SWAP_SET_NAMES.values(),
    "b_trade_id",
    "b_expected",
    *(f"a_{name}" for name in rows.AUDIT_COLUMNS),
)


def _swapped(found: Sequence[Any]) -> set[Any]:
    """The trades of a batch of swaps that moved (`direct.GroupCommit`): each swap that
    matched returns the trade id it was given (`b_trade_id`), once."""
    return {row[0] for row in found}


#: `_TRADE_SWAP_AUDITED` with its binds in the order `audited_swap_values` gives their
#: values: the columns a move can change (`rows.trade_move_row`, as `s_<column>`), the row
#: and the status it must still have (`b_trade_id`, `b_expected`) and the entry
#: (`rows.audit_row`, as `a_<column>`).
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
    its entry, one PostgreSQL statement; it matched a row when its rowcount is 1.
    `SqlStorage.swap_trade` sends it alone (`Database.run_alone`: autocommitted, no unit
    of stores around it); `SqlTrades.swap` in its unit (`audited_swap`)."""
    return (*rows.trade_move_row(trade), trade.trade_id, expected._value_, *rows.audit_row(entry))


def audited_swap(
    expected: TradeStatus, trade: Trade, entry: AuditEntry
) -> tuple[Any, dict[str, Any]]:
    """`TRADE_SWAP_AUDITED` and its parameters by bind name, as a unit's `execute` takes
    them (`SqlTrades.swap`)."""
    values = audited_swap_values(expected, trade, entry)
    return TRADE_SWAP_AUDITED.statement, TRADE_SWAP_AUDITED.parameters(values)


def audited_add_values(trade: Trade, entry: AuditEntry) -> tuple[Any, ...]:
    """The values of `TRADE_ADD_AUDITED`: `trade`'s row, then `entry`'s."""
    return (*rows.trade_row(trade), *rows.audit_row(entry))


_TRADE_LAPSED = select(trades).where(
    trades.c.client_id == _b("client_id"),
    trades.c.user_id == _b("user_id"),
    # A literal, not a bound value: the planner proves `ix_trades_open_expiry`'s partial
    # condition only from the literal (SQLite always, PostgreSQL under a generic plan).
    text("trades.status = 'open'"),
    trades.c.quote_expires_at <= _b("now"),
)

# `ix_trades_in_flight`'s partial condition, as a literal for the same reason.
_TRADE_IN_FLIGHT = (
    select(trades)
    .where(text("trades.status IN ('approved', 'executing')"))
    .order_by(trades.c.created_at, trades.c.trade_id)
    .limit(_b("limit"))
)
_PRICES_LOAD = select(price_records)


def _trade_page(by_side: bool, by_status: bool) -> Any:
    query = select(trades).where(
        trades.c.client_id == _b("client_id"), trades.c.user_id == _b("user_id")
    )
    if by_side:
        query = query.where(trades.c.side == _b("side"))
    if by_status:
        query = query.where(trades.c.status == _b("status"))
    order = (trades.c.created_at.desc(), trades.c.trade_id.desc())
    return query.order_by(*order).limit(_b("limit"))


_TRADE_PAGES = {
    (side, status): _trade_page(side, status) for side in (False, True) for status in (False, True)
}
_SEND_KEY = (sends.c.client_id == _b("client_id"), sends.c.request_id == _b("request_id"))
_SEND_GET = select(sends).where(*_SEND_KEY)
_SEND_LOCK = _SEND_GET.with_for_update()
_SEND_CLAIM = (
    update(sends)
    .where(*_SEND_KEY, sends.c.attempt == _b("expected_attempt"))
    .values(attempt=_b("attempt"), locked_until=_b("locked_until"), updated_at=_b("updated_at"))
)
_SEND_MUTABLE = (
    "state",
    "locked_until",
    "tx_hash",
    "raw_tx",
    "result",
    "updated_at",
    "chain_status",
    "chain_checked_at",
    "chain_final_at",
)
_SEND_ADVANCE = update(sends).where(
    *_SEND_KEY,
    sends.c.state == _b("expected_state"),
    sends.c.attempt == _b("expected_attempt"),
)
# `ix_sends_following`'s partial condition as a literal (see `_TRADE_LAPSED`).
_SEND_FOLLOWED = text(f"sends.{SEND_FOLLOWED}")
_SEND_FOLLOWING = (
    select(sends)
    .where(_SEND_FOLLOWED)
    .order_by(sends.c.chain_checked_at, sends.c.created_at, sends.c.client_id, sends.c.request_id)
    .limit(_b("limit"))
)
_SEND_COUNT_FOLLOWING = select(func.count().label("n")).select_from(sends).where(_SEND_FOLLOWED)
_SEND_CHECKED = update(sends).where(*_SEND_KEY, _SEND_FOLLOWED).values(chain_checked_at=_b("at"))
_SEND_TRACK = (
    update(sends)
    .where(
        *_SEND_KEY,
        _SEND_FOLLOWED,
        sends.c.chain_status == _b("expected_status"),
        sends.c.tx_hash == _b("expected_hash"),
    )
    .values(
        chain_status=_b("status"),
        chain_checked_at=_b("at"),
        chain_final_at=_b("final_at"),
        tx_hash=_b("tx_hash"),
        raw_tx=_b("raw_tx"),
    )
)
_SEND_BY_HASH = select(sends).where(
    sends.c.client_id == _b("client_id"), sends.c.tx_hash == _b("tx_hash")
)
_SEND_BY_OLD_HASH = (
    select(sends)
    .join(
        send_hashes,
        (send_hashes.c.client_id == sends.c.client_id)
        & (send_hashes.c.request_id == sends.c.request_id),
    )
    .where(send_hashes.c.client_id == _b("client_id"), send_hashes.c.tx_hash == _b("tx_hash"))
)
_AUDIT_NEWEST = select(audit_log).order_by(audit_log.c.entry_id.desc()).limit(_b("limit"))

#: The plain INSERT of each table whose inserts a unit may defer.
_INSERTS = {table.name: table.insert() for table in (trades, audit_log)}

#: Dialect-specific statements (upserts), built on first use per dialect.
_UPSERTS: dict[tuple[str, str], Any] = {}


def _upsert(database: Database, name: str) -> Any:
    key = ("sqlite" if database.is_sqlite else "postgresql", name)
    statement = _UPSERTS.get(key)
    if statement is None:
        statement = _UPSERTS[key] = _build_upsert(database, name)
    return statement


def _build_upsert(database: Database, name: str) -> Any:
    if name == "client_insert":
        return database.insert(api_clients).on_conflict_do_nothing()
    if name == "client_upsert":
        insert = database.insert(api_clients)
        # the failures are /auth's (`add_auth_failures`): an operator's change leaves them
        kept = ("client_id", *rows.CLIENT_AUTH_COLUMNS)
        columns = [c.name for c in api_clients.c if c.name not in kept]
        return insert.on_conflict_do_update(
            index_elements=[api_clients.c.client_id],
            set_={c: insert.excluded[c] for c in columns},
        )
    if name == "user_insert":
        return database.insert(users).on_conflict_do_nothing()
    if name == "wallet_insert":
        return database.insert(wallets).on_conflict_do_nothing()
    if name in ("wallet_upsert_user", "wallet_upsert_platform"):
        insert = database.insert(wallets)
        user_wallet = name == "wallet_upsert_user"
        owner = WalletOwner.USER if user_wallet else WalletOwner.PLATFORM
        return insert.on_conflict_do_update(
            index_elements=["client_id", "user_id"] if user_wallet else ["client_id"],
            index_where=wallets.c.owner == owner.value,
            set_={
                k: insert.excluded[k] for k in ("sealed", "addresses", "created_at", "updated_at")
            },
        )
    if name == "send_insert":
        return database.insert(sends).on_conflict_do_nothing()
    if name == "send_hash_insert":
        return database.insert(send_hashes).on_conflict_do_nothing()
    if name == "price_upsert":
        insert = database.insert(price_records)
        # never back in time: a slower writer with an older instant changes nothing
        return insert.on_conflict_do_update(
            index_elements=[price_records.c.symbol, price_records.c.fiat],
            set_={"price": insert.excluded.price, "recorded_at": insert.excluded.recorded_at},
            where=price_records.c.recorded_at <= insert.excluded.recorded_at,
        )
    raise KeyError(name)  # pragma: no cover - a typo in this module


class SqlUnit(UnitOfWork):
    """The stores over one connection in one transaction.

    Write units defer the inserts that answer nothing (`trades.add`, `audit.append`):
    they are sent before the next statement of the unit or when it ends (`flush`). On
    PostgreSQL together, as one statement: a unit that wrote only those (a quote and its
    entry) is then one autocommitted statement, no BEGIN, no COMMIT round trips. On SQLite
    one by one, and a unit that wrote only those is handed to the write queue whole when it
    ends (`SqlStorage.write`).
    """

    def __init__(
        self,
        database: Database,
        conn: Any,
        *,
        writable: bool,
        trade_rows: rows.TradeRows,
    ) -> None:
        self.database = database
        #: trades from rows (`SqlStorage.trade_rows`: the database's terminal trades built once)
        self.trade_rows = trade_rows
        self.conn = conn
        self.writable = writable
        self._pending: list[tuple[Table, dict[str, Any]]] = []
        self.clients: ClientStore = SqlClients(self)
        self.wallets: WalletStore = SqlWallets(self)
        self.trades: SqlTrades = SqlTrades(self)
        self.sends: SendStore = SqlSends(self)
        self.audit: AuditStore = SqlAudit(self)
        self.prices: PriceRecords = SqlPrices(self)

    def writer(self) -> Any:
        """The connection, for a write; `RuntimeError` in a read unit."""
        if not self.writable:
            raise RuntimeError("a read unit cannot write; use storage.write()")
        return self.conn

    def upsert(self, name: str) -> Any:
        return _upsert(self.database, name)

    def take_pending(self) -> list[tuple[Table, dict[str, Any]]]:
        """The deferred inserts, no longer the unit's to send (`insert_all` sends them)."""
        pending, self._pending = self._pending, []
        return pending

    async def run(self, statement: Any, params: dict[str, Any]) -> Any:
        """Execute one statement of the unit, after the inserts deferred before it."""
        if self._pending:
            await self.flush()
        return await self.conn.execute(statement, params)

    def defer(self, table: Table, values: dict[str, Any]) -> None:
        """An insert that answers nothing: deferred (class docstring), with no await."""
        self.writer()
        self._pending.append((table, values))

    async def flush(self, *, last: bool = False) -> None:
        """Send the deferred inserts: on PostgreSQL as one statement, which `last` (the
        unit ends cleanly) autocommits when it is all the unit sent (`execute_alone`; a
        single statement is atomic on its own); on SQLite one by one."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        if self.database.is_sqlite:
            await insert_all(pending, self.conn)
            return
        statement, params = _combined(pending)
        if statement is None:  # a table twice: one statement each, in order
            await insert_all(pending, self.conn)
        elif last:
            await self.conn.execute_alone(statement, params)
        else:
            await self.conn.execute(statement, params)

    async def one(self, query: Any, params: dict[str, Any]) -> Any:
        result = await self.run(query, params)
        return result.mappings().one_or_none()

    async def all(self, query: Any, params: dict[str, Any]) -> Any:
        result = await self.run(query, params)
        return result.mappings().all()


#: (table, its columns) of each deferred insert -> the one statement that makes them all
#: (None: a table comes twice), and the binds of their values, in order.
_COMBINED: dict[tuple[tuple[Table, tuple[str, ...]], ...], tuple[Any, list[str]]] = {}


async def insert_all(pending: list[tuple[Table, dict[str, Any]]], conn: Any) -> None:
    """Deferred inserts (`SqlUnit.take_pending`) on `conn`, one statement each, in order."""
    for table, values in pending:
        await conn.execute(_INSERTS[table.name], values)


class LazyWriter:
    """SQLite: a write unit's connection that opens the unit's transaction
    (`Database.unit(write=True)`, entered on `stack`) at its first statement; until then
    the unit holds no lock (`SqlStorage.write`)."""

    __slots__ = ("_conn", "_database", "_stack")

    def __init__(self, database: Database, stack: contextlib.AsyncExitStack) -> None:
        self._database = database
        self._stack = stack
        self._conn: Any = None

    @property
    def opened(self) -> bool:
        return self._conn is not None

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        conn = self._conn
        if conn is None:
            conn = self._conn = await self._stack.enter_async_context(
                self._database.unit(write=True)
            )
        return await conn.execute(statement, parameters)


def _combined(pending: list[tuple[Table, dict[str, Any]]]) -> tuple[Any, dict[str, Any]]:
    """One PostgreSQL statement for several inserts (data-modifying CTEs), built once per
    shape (the tables and the names of their values, in order); (None, {}) when a table
    comes twice (the order of its rows would be lost).

    The parameters are the values of each insert in order, under the binds of the shape
    (`p<n>_<column>`), zipped in one call: a quote's 32 were renamed one by one before,
    and its shape checked for a repeated table each time (6.1 -> 2.9 us, alone)."""
    if len(pending) == 1:
        table, values = pending[0]
        return _INSERTS[table.name], values
    shape = tuple([(table, tuple(values)) for table, values in pending])
    known = _COMBINED.get(shape)
    if known is None:
        known = _COMBINED[shape] = _build_combined(pending)
    statement, binds = known
    if statement is None:
        return None, {}
    return statement, dict(zip(binds, chain.from_iterable([v.values() for _, v in pending])))


def _build_combined(pending: list[tuple[Table, dict[str, Any]]]) -> tuple[Any, list[str]]:
    """`_combined`'s statement for the shape of `pending` (None when a table comes twice)
    and its binds, in the order of the values."""
    names = [table.name for table, _ in pending]
    if len(set(names)) != len(names):
        return None, []

    def insert_of(n: int, table: Table, keys: Any) -> Any:
        return insert(table).values(
            {key: bindparam(f"p{n}_{key}", type_=table.c[key].type) for key in sorted(keys)}
        )

    *first, last = list(enumerate(pending))
    statement = insert_of(last[0], last[1][0], last[1][1])
    for n, (table, values) in first:
        statement = statement.add_cte(insert_of(n, table, values).cte(f"w{n}"))
    binds = [f"p{n}_{key}" for n, (_, values) in enumerate(pending) for key in values]
    return statement, binds


#: A quote and its entry as one PostgreSQL statement: what a write unit of `trades.add` and
#: `audit.append` sends (`SqlUnit.flush`, `_combined`), built by the same builder, with its
#: binds in `audited_add_values`' order: the trade's row (`rows.trade_row`, as
#: `p0_<column>`), then the entry (`rows.audit_row`, as `p1_<column>`).
#: `SqlStorage.add_trade` sends it alone, or in a batch of such quotes (group commit: the
#: same statement once for each; the batch stores every quote or none).
TRADE_ADD_AUDITED = Positional(
    *_build_combined(
        [
            (trades, dict.fromkeys(rows.TRADE_COLUMNS)),
            (audit_log, dict.fromkeys(rows.AUDIT_COLUMNS)),
        ]
    )
)
TRADE_ADD_AUDITED.batch = Batch(TRADE_ADD_AUDITED, key=TRADE_ADD_AUDITED.names.index("p0_trade_id"))


class SqlClients(ClientStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, client: ApiClient) -> None:
        self._unit.writer()
        statement = self._unit.upsert("client_insert")
        if (await self._unit.run(statement, rows.client_values(client))).rowcount != 1:
            raise InvalidRequest("api client exists already")

    async def get(self, client_id: str) -> ApiClient | None:
        row = await self._unit.one(_CLIENT_GET, {"b_client_id": client_id})
        return None if row is None else rows.client_from(row)

    async def all(self) -> list[ApiClient]:
        return [rows.client_from(r) for r in await self._unit.all(_CLIENT_ALL, {})]

    async def update(self, client: ApiClient) -> None:
        self._unit.writer()
        await self._unit.run(self._unit.upsert("client_upsert"), rows.client_values(client))

    async def add_auth_failures(
        self, client_id: str, failures: AuthFailures, *, entry: AuditEntry | None = None
    ) -> bool:
        stored = await self._locked_failures(client_id)
        if stored is None:
            return False
        await self._set_failures(client_id, stored.added(failures))
        began = stored.count == 0
        if began and entry is not None:
            await self._unit.audit.append(entry)
        return began

    async def auth_succeeded(self, client_id: str) -> AuthFailures:
        run = await self._locked_failures(client_id)
        if run is None:
            return AuthFailures()
        if run != run.ended():
            await self._set_failures(client_id, run.ended())
        return run

    async def _locked_failures(self, client_id: str) -> AuthFailures | None:
        self._unit.writer()
        row = await self._unit.one(_CLIENT_FAILURES_LOCK, {"b_client_id": client_id})
        return None if row is None else rows.auth_failures_from(row)

    async def _set_failures(self, client_id: str, failures: AuthFailures) -> None:
        values = rows.auth_failures_values(failures)
        await self._unit.run(_CLIENT_FAILURES_SET, {**values, "b_client_id": client_id})


class SqlWallets(WalletStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add_user(
        self, user: User, wallet: WalletRecord, *, request_id: str | None = None
    ) -> bool:
        self._unit.writer()
        values = rows.user_values(user, request_id)
        if request_id is None:
            await self._unit.run(_USER_INSERT, values)
        else:
            # The unique (client_id, request_id) index decides a race between two /create
            # calls with one X-Request-Id: the second inserts nothing.
            if (await self._unit.run(self._unit.upsert("user_insert"), values)).rowcount != 1:
                return False
        await self._unit.run(_WALLET_INSERT, rows.wallet_values(wallet))
        return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        params = {"b_client_id": client_id, "b_request_id": request_id}
        found = (await self._unit.run(_USER_BY_REQUEST, params)).scalar_one_or_none()
        return None if found is None else str(found)

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        row = await self._unit.one(_USER_GET, {"b_client_id": client_id, "b_user_id": user_id})
        return None if row is None else rows.user_from(row)

    async def add(self, wallet: WalletRecord) -> bool:
        self._unit.writer()
        statement = self._unit.upsert("wallet_insert")
        return bool((await self._unit.run(statement, rows.wallet_values(wallet))).rowcount == 1)

    async def get(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        params = {"b_client_id": client_id, "b_owner": owner.value}
        if user_id is None:
            row = await self._unit.one(_WALLET_GET_PLATFORM, params)
        else:
            row = await self._unit.one(_WALLET_GET_USER, {**params, "b_user_id": user_id})
        return None if row is None else rows.wallet_from(row)

    async def update(self, wallet: WalletRecord) -> None:
        self._unit.writer()
        user_wallet = wallet.owner is WalletOwner.USER
        name = "wallet_upsert_user" if user_wallet else "wallet_upsert_platform"
        await self._unit.run(self._unit.upsert(name), rows.wallet_values(wallet))


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
        if entry is None or self._unit.database.is_sqlite:
            # what a move can change, and nothing else: the quote's own columns stay as stored
            values = rows.trade_move_values(trade)
            values["b_trade_id"] = trade.trade_id
            values["b_expected"] = expected.value
            swapped = (await self._unit.run(_TRADE_SWAP, values)).rowcount == 1
            if swapped and entry is not None:
                await self._unit.audit.append(entry)
            return bool(swapped)
        # PostgreSQL: the compare-and-set and its entry in one statement; the entry's
        # INSERT selects from the UPDATE's row, so it adds a row only when that matched.
        result = await self._unit.run(*audited_swap(expected, trade, entry))
        return bool(result.rowcount == 1)

    async def lapsed(self, client_id: str, user_id: str, now: datetime) -> list[Trade]:
        params = {"b_client_id": client_id, "b_user_id": user_id, "b_now": now}
        return [self._unit.trade_rows(r) for r in await self._unit.all(_TRADE_LAPSED, params)]

    async def in_flight(self, limit: int) -> list[Trade]:
        found = await self._unit.all(_TRADE_IN_FLIGHT, {"b_limit": max(limit, 0)})
        return [self._unit.trade_rows(r) for r in found]


class SqlSends(SendStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def begin(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        self._unit.writer()
        fresh = SendRecord.start(client_id, request_id, fingerprint, now, lease)
        key = {"b_client_id": client_id, "b_request_id": request_id}
        statement = self._unit.upsert("send_insert")
        if (await self._unit.run(statement, rows.send_values(fresh))).rowcount == 1:
            return fresh
        # Another request made it first: lock the row and let the domain decide.
        row = await self._unit.one(_SEND_LOCK, key)
        if row is None:  # pragma: no cover - rows are never deleted
            raise InvalidRequest("X-Request-Id record vanished; retry")
        stored = rows.send_from(row)
        claimed = stored.claim(fingerprint, now, lease)  # raises the 409 and 422 rows
        if claimed is not stored:
            await self._unit.run(
                _SEND_CLAIM,
                {
                    **key,
                    "b_expected_attempt": stored.attempt,
                    "b_attempt": claimed.attempt,
                    "b_locked_until": claimed.locked_until,
                    "b_updated_at": claimed.updated_at,
                },
            )
        return claimed

    async def advance(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        self._unit.writer()
        values = rows.send_values(new)
        params = {k: values[k] for k in _SEND_MUTABLE}
        params.update(
            b_client_id=current.client_id,
            b_request_id=current.request_id,
            b_expected_state=current.state.value,
            b_expected_attempt=current.attempt,
        )
        return bool((await self._unit.run(_SEND_ADVANCE, params)).rowcount == 1)

    async def get(self, client_id: str, request_id: str) -> SendRecord | None:
        row = await self._unit.one(
            _SEND_GET, {"b_client_id": client_id, "b_request_id": request_id}
        )
        return None if row is None else rows.send_from(row)

    async def count_following(self) -> int:
        found = await self._unit.all(_SEND_COUNT_FOLLOWING, {})
        return int(found[0]["n"])

    async def following(self, limit: int) -> list[SendRecord]:
        found = await self._unit.all(_SEND_FOLLOWING, {"b_limit": max(limit, 0)})
        return [rows.send_from(r) for r in found]

    async def checked_chain(self, keys: Sequence[tuple[str, str]], at: datetime) -> None:
        self._unit.writer()
        params = [
            {"b_client_id": client_id, "b_request_id": request_id, "b_at": at}
            for client_id, request_id in keys
        ]
        if params:
            await self._unit.run(_SEND_CHECKED, params)  # type: ignore[arg-type]

    async def track(
        self, current: SendRecord, new: SendRecord, *, entry: AuditEntry | None = None
    ) -> bool:
        current.require_successor(new)
        if new.chain_status is None or current.chain_status is None or not current.tx_hash:
            raise InvalidSendTransition()
        self._unit.writer()
        at = new.chain_checked_at or new.updated_at
        params = {
            "b_client_id": current.client_id,
            "b_request_id": current.request_id,
            "b_expected_status": current.chain_status.value,
            "b_expected_hash": current.tx_hash,
            "b_status": new.chain_status.value,
            "b_at": at,
            "b_final_at": at if new.chain_status.is_final else None,
            "b_tx_hash": new.tx_hash,
            "b_raw_tx": None if new.raw_tx is None else bytes(new.raw_tx),
        }
        if (await self._unit.run(_SEND_TRACK, params)).rowcount != 1:
            return False
        if new.tx_hash and new.tx_hash != current.tx_hash:
            statement = self._unit.upsert("send_hash_insert")
            await self._unit.run(
                statement,
                [  # type: ignore[arg-type]
                    {"client_id": current.client_id, "tx_hash": h, "request_id": current.request_id}
                    for h in (current.tx_hash, new.tx_hash)
                ],
            )
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def by_hash(self, client_id: str, tx_hash: str) -> SendRecord | None:
        params = {"b_client_id": client_id, "b_tx_hash": tx_hash}
        row = await self._unit.one(_SEND_BY_OLD_HASH, params)
        if row is None:
            row = await self._unit.one(_SEND_BY_HASH, params)
        return None if row is None else rows.send_from(row)


class SqlAudit(AuditStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, entry: AuditEntry) -> None:
        self._unit.defer(audit_log, rows.audit_values(entry))

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        found = await self._unit.all(_AUDIT_NEWEST, {"b_limit": max(limit, 0)})
        return [rows.audit_from(r) for r in found]


class SqlPrices(PriceRecords):
    """`price_records`: one upsert per pair, in one statement (executemany)."""

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def save(self, table: Mapping[tuple[str, Fiat], Decimal], at: datetime) -> None:
        self._unit.writer()
        values = [
            {"symbol": symbol, "fiat": Fiat(fiat).value, "price": price, "recorded_at": at}
            for (symbol, fiat), price in sorted(table.items())
        ]
        if values:
            await self._unit.run(self._unit.upsert("price_upsert"), values)  # type: ignore[arg-type]

    async def load(self) -> StoredPrices:
        found = await self._unit.all(_PRICES_LOAD, {})
        return {(str(r["symbol"]), Fiat(r["fiat"])): (r["price"], r["recorded_at"]) for r in found}


__all__ = ["SqlUnit"]
