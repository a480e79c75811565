"""What an address holds: its balance summed from its shares of the transactions, and the
shares a reader connection keeps while the ledger is unchanged (`Seen`).

Rules:
- Balances are computed from the transactions: an outgoing amount and its fee leave the
  payer at once (pending or not); an incoming amount counts once the transaction is
  confirmed. Fees come off the chain's native coin.
- A reader connection serves an address's shares (what a balance is summed from) again
  while the ledger is unchanged since it read them: `PRAGMA data_version` moves with every
  commit of any other connection, in any process, and is read before each balance
  (docs/performance.md, "Caches, and why each is safe"). The balance itself is summed each
  time, at the clock's instant, so a credit confirms on time.
- The writer, whose reads check a spend under the write lock, always reads the rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime

from walletcore.domain.assets import Chain
from walletcore_sandbox.ledger.store import KNOWS, SHARES

#: (chain, address, asset id, whether the asset is the chain's coin, which pays the fees):
#: an address's holding of one asset, whose shares are read.
Holding = tuple[Chain, str, int, bool]
#: One row of `SHARES`, read: (role, units, when a credit confirms; None for a debit).
Share = tuple[int, int, datetime | None]
#: The reader connection's count of the commits it has seen from other connections.
_DATA_VERSION = "PRAGMA data_version"
#: Addresses' shares a reader connection keeps while the ledger is unchanged (all are
#: dropped at the next change; past this many, at the next new address).
SHARES_SEEN = 4096


class Seen:
    """The shares a reader connection read, served again while the ledger is unchanged.

    `PRAGMA data_version` changes when any other connection (of this process or another)
    has committed since the connection's last read, and never for the connection's own
    changes: a reader has none (`query_only`). It is read before the shares, so shares
    read after a commit that came in between are kept under the version before it, and
    dropped at the next read. Only reader connections have one: the writer, whose reads
    check a spend under the write lock, always reads the rows.
    """

    __slots__ = ("_versions", "shares", "version")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.version: int | None = None
        self.shares: dict[Holding, tuple[Share, ...]] = {}
        #: the connection's cursor that reads the version, made once (not one per read)
        self._versions = conn.cursor()

    def shares_of(self, conn: sqlite3.Connection, holding: Holding) -> tuple[Share, ...]:
        version = self._versions.execute(_DATA_VERSION).fetchone()[0]
        shares = self.shares
        if version != self.version:
            shares.clear()
            self.version = version
        found = shares.get(holding)
        if found is None:
            if len(shares) >= SHARES_SEEN:
                shares.clear()
            found = shares[holding] = tuple(shares_read(conn, holding))
        return found


def balance(conn: sqlite3.Connection, seen: Seen | None, holding: Holding, now: datetime) -> int:
    """What the address can spend at `now` (module rules); `seen`: the reader's kept shares,
    None on the writer."""
    return total(_shares_through(conn, seen, holding), now)


def known_balance(
    conn: sqlite3.Connection, seen: Seen | None, holding: Holding, now: datetime
) -> int | None:
    """`balance`, or None when the address took part in no transaction on `chain`: it has
    shares of this asset, or else `KNOWS` tells (the rare case: none of this asset)."""
    shares = _shares_through(conn, seen, holding)
    chain, address, _, _ = holding
    if not shares and conn.execute(KNOWS, (chain.value, address)).fetchone() is None:
        return None
    return total(shares, now)


def _shares_through(
    conn: sqlite3.Connection, seen: Seen | None, holding: Holding
) -> Sequence[Share]:
    return shares_read(conn, holding) if seen is None else seen.shares_of(conn, holding)


def shares_read(conn: sqlite3.Connection, holding: Holding) -> list[Share]:
    """The address's shares in the asset on the chain (`SHARES`), read: units as integers,
    a credit's confirmation as an instant (once per read of the rows, not per balance a
    reader's kept shares serve)."""
    chain, address, asset_id, is_native = holding
    native = int(is_native)
    return [
        (role, int(units), None if confirm_at is None else datetime.fromisoformat(confirm_at))
        for role, units, confirm_at in conn.execute(
            SHARES, (chain.value, address, asset_id, native)
        )
    ]


def total(shares: Iterable[Share], now: datetime) -> int:
    """Confirmed credits, minus every debit and every fee paid."""
    result = 0
    for role, units, confirm_at in shares:
        if role == 0:
            if confirm_at is not None and now >= confirm_at:
                result += units
        else:
            result -= units
    return result


__all__ = [
    "SHARES_SEEN",
    "Holding",
    "Seen",
    "Share",
    "balance",
    "known_balance",
    "shares_read",
    "total",
]
