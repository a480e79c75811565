"""The stores of `SqlStorage`, one module each, over the connection of one unit of work.

- `unit`: `SqlUnit` (the stores of one unit, its deferred inserts) and `LazyWriter`;
- `clients`, `wallets`, `trades`, `sends`, `audit`, `deposits`, `events`, `prices`,
  `webhooks`, `settlements`, `desk` (the desk's pauses), `policies`: one store each, with
  its statements (built once, at import, with named binds) and its dialect's upserts;
- `statements`: what they share (the named binds, the deferred inserts and the one
  statement several of them make, the upserts built once per dialect).
"""

from walletcore_sql.stores.statements import insert_all
from walletcore_sql.stores.trades import (
    TRADE_ADD_AUDITED,
    TRADE_SWAP_AUDITED,
    audited_add_values,
    audited_swap,
    audited_swap_values,
)
from walletcore_sql.stores.unit import LazyWriter, SqlUnit

__all__ = [
    "TRADE_ADD_AUDITED",
    "TRADE_SWAP_AUDITED",
    "LazyWriter",
    "SqlUnit",
    "audited_add_values",
    "audited_swap",
    "audited_swap_values",
    "insert_all",
]
