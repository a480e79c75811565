"""Port of the stored prices: the table a refresh job saved, shared by every process of a
deployment (`walletcore.pricing.SharedPriceSource` serves it; `walletcore.jobs.prices`
writes it).

Rules every storage keeps (`StorageContract` checks them):
- `save(table, at)` records each (symbol, fiat) of `table` with the instant `at`; a pair
  not in `table` keeps its last value and instant (a partial upstream answer loses
  nothing).
- A save never moves a pair back in time: a slower writer with an older `at` leaves the
  newer value in place.
- `load()` returns every recorded pair with its price and instant, as committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from walletcore.domain.assets import Fiat

#: (symbol, fiat) -> (price, when it was recorded)
StoredPrices = Mapping[tuple[str, Fiat], tuple[Decimal, datetime]]


class PriceRecords(Protocol):
    """The last known price of each symbol in each fiat, with when it was recorded."""

    async def save(self, table: Mapping[tuple[str, Fiat], Decimal], at: datetime) -> None:
        """Record `table` (positive, finite prices) as of `at` (write units only)."""
        ...

    async def load(self) -> StoredPrices:
        """Every recorded (symbol, fiat) with its price and when it was recorded."""
        ...


__all__ = ["PriceRecords", "StoredPrices"]
