"""`PriceRecords` on SQL: the deployment's last known prices (`price_records`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from walletcore.domain.assets import Fiat
from walletcore.ports.prices import PriceRecords, StoredPrices
from walletcore_sql.database import Database
from walletcore_sql.tables import price_records

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_PRICES_LOAD = select(price_records)


def _price_upsert(database: Database) -> Any:
    insert = database.insert(price_records)
    # never back in time: a slower writer with an older instant changes nothing
    return insert.on_conflict_do_update(
        index_elements=[price_records.c.symbol, price_records.c.fiat],
        set_={"price": insert.excluded.price, "recorded_at": insert.excluded.recorded_at},
        where=price_records.c.recorded_at <= insert.excluded.recorded_at,
    )


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
            await self._unit.run(self._unit.upsert(_price_upsert), values)  # type: ignore[arg-type]

    async def load(self) -> StoredPrices:
        found = await self._unit.all(_PRICES_LOAD, {})
        return {(str(r["symbol"]), Fiat(r["fiat"])): (r["price"], r["recorded_at"]) for r in found}
