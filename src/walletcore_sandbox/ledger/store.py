"""The ledger's SQLite file: its layout, the statements that read and write it, and a
transaction as a row (`LedgerTx`).

- One table of transactions (`txs`), in the order they were accepted, indexed by each role
  an address can have in one: recipient, sender, fee payer.
- A ledger file carries its mark (`PRAGMA application_id`, "WCSL") and its layout version
  (`PRAGMA user_version`): a new file gets the layout; a foreign SQLite file, or one of a
  newer layout, is refused (`LedgerError`).
- Amounts are stored as decimal text: base units overflow SQLite's 64-bit integers (100 ETH
  is 10^20 wei). Instants are ISO 8601 text, UTC.
- A change is one `BEGIN IMMEDIATE` transaction (`immediate`): the database's write lock
  from the start, so what is read inside is what is changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.times import utc

DATA_FILE = "sandbox-chain.db"
#: `PRAGMA application_id` of a ledger file ("WCSL"): a foreign SQLite file is refused.
APPLICATION_ID = 0x5743534C
#: `PRAGMA user_version`: the layout below.
VERSION = 1

SCHEMA = (
    """
    CREATE TABLE txs (
        seq          INTEGER PRIMARY KEY,  -- the order transactions were accepted in
        tx_hash      TEXT NOT NULL UNIQUE,
        chain        TEXT NOT NULL,
        asset_id     INTEGER NOT NULL,
        sender       TEXT,                 -- NULL: a faucet credit
        recipient    TEXT NOT NULL,
        amount_units TEXT NOT NULL,        -- what the recipient receives, base units
        fee_units    TEXT NOT NULL,
        fee_payer    TEXT,
        accepted_at  TEXT NOT NULL,        -- ISO 8601, UTC
        confirm_at   TEXT NOT NULL
    )
    """,
    "CREATE INDEX txs_by_recipient ON txs (chain, recipient, asset_id)",
    "CREATE INDEX txs_by_sender ON txs (chain, sender, asset_id)",
    "CREATE INDEX txs_by_fee_payer ON txs (chain, fee_payer)",
)
COLUMNS = (
    "tx_hash, chain, asset_id, sender, recipient, amount_units, fee_units, fee_payer, "
    "accepted_at, confirm_at"
)
INSERT = f"INSERT INTO txs ({COLUMNS}) VALUES ({', '.join('?' * (COLUMNS.count(',') + 1))})"
# The reads of one address: one index search per role (recipient, sender, fee payer). An
# `OR` of the roles under one `chain = ?` is a scan of every transaction in SQLite (its OR
# optimisation needs each term indexable on its own), and `seq IN (those searches)` is one
# too once the planner has statistics of a small table: each balance read grew with the
# whole ledger, 1.4 ms at 10,000 transactions against 12 us (tests read the plans).
#: ?1 chain, ?2 address, ?3 asset, ?4 1 when the asset is the chain's native coin (the
#: fees the address paid come off it), else 0: one row per role the address had in a
#: transaction (0 received, 1 sent, 2 paid the fee), so a balance needs no de-duplication
#: of transactions (a `UNION` of whole rows sorts them: 15 -> 10 us for one transaction,
#: 64 -> 28 us for 18).
SHARES = (
    "SELECT 0, amount_units, confirm_at FROM txs "
    "WHERE chain = ?1 AND recipient = ?2 AND asset_id = ?3 "
    "UNION ALL SELECT 1, amount_units, NULL FROM txs "
    "WHERE chain = ?1 AND sender = ?2 AND asset_id = ?3 "
    "UNION ALL SELECT 2, fee_units, NULL FROM txs WHERE ?4 AND chain = ?1 AND fee_payer = ?2"
)
#: ?1 chain, ?2 address: a row when it took part in any transaction.
KNOWS = (
    "SELECT 1 FROM txs WHERE chain = ?1 AND recipient = ?2 "
    "UNION ALL SELECT 1 FROM txs WHERE chain = ?1 AND sender = ?2 "
    "UNION ALL SELECT 1 FROM txs WHERE chain = ?1 AND fee_payer = ?2 LIMIT 1"
)
#: chain, address, asset: a row when the address ever received the asset.
RECEIVED = "SELECT 1 FROM txs WHERE chain = ? AND recipient = ? AND asset_id = ? LIMIT 1"
#: ?1 chain, ?2 address, ?3 asset, ?4 limit: its transactions of the asset, newest first.
HISTORY = (
    f"SELECT {COLUMNS} FROM ("
    f"SELECT seq, {COLUMNS} FROM txs WHERE chain = ?1 AND recipient = ?2 AND asset_id = ?3 "
    f"UNION SELECT seq, {COLUMNS} FROM txs WHERE chain = ?1 AND sender = ?2 AND asset_id = ?3"
    ") ORDER BY seq DESC LIMIT ?4"
)
#: tx hash: the transaction of that hash.
FIND = f"SELECT {COLUMNS} FROM txs WHERE tx_hash = ?"
#: Every transaction, in the order they were accepted.
EVERY = f"SELECT {COLUMNS} FROM txs ORDER BY seq"
#: The deposit scan (the sandbox gateway's `DepositScanner`): the ledger's entries play a
#: chain's blocks, one transaction each, numbered by `seq` (its height) and named by its
#: hash. ?1 first, ?2 last, ?3 chain: the chain's transactions in those heights.
RANGE = f"SELECT seq, {COLUMNS} FROM txs WHERE seq BETWEEN ?1 AND ?2 AND chain = ?3 ORDER BY seq"
#: The newest entry (the head), and the entry at a height.
HEAD = "SELECT seq, tx_hash FROM txs ORDER BY seq DESC LIMIT 1"
AT = "SELECT seq, tx_hash FROM txs WHERE seq = ?"
#: tx hash: its height.
SEQ_OF = "SELECT seq FROM txs WHERE tx_hash = ?"
#: tx hash: a row when that hash is on the ledger already.
HAS_HASH = "SELECT 1 FROM txs WHERE tx_hash = ?"


class LedgerError(RuntimeError):
    """The ledger file cannot be used (not a database, foreign, or of a newer layout)."""


@dataclass(frozen=True, slots=True)
class LedgerTx:
    tx_hash: str
    chain: Chain
    asset_id: int
    #: None: a faucet credit (`walletcore sandbox fund`).
    sender: str | None
    recipient: str
    #: What the recipient receives.
    amount_units: int
    fee_units: int
    fee_payer: str | None
    accepted_at: datetime
    confirm_at: datetime

    def confirmed(self, now: datetime) -> bool:
        return now >= self.confirm_at

    def values(self) -> tuple[Any, ...]:
        """The row's values, in `COLUMNS` order."""
        return (
            self.tx_hash,
            self.chain.value,
            self.asset_id,
            self.sender,
            self.recipient,
            str(self.amount_units),
            str(self.fee_units),
            self.fee_payer,
            utc(self.accepted_at).isoformat(),
            utc(self.confirm_at).isoformat(),
        )

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> LedgerTx:
        """A transaction from its row (`COLUMNS` order)."""
        tx_hash, chain, asset_id, sender, recipient, amount, fee, payer, accepted, confirm = row
        return cls(
            tx_hash=tx_hash,
            chain=Chain(chain),
            asset_id=int(asset_id),
            sender=sender,
            recipient=recipient,
            amount_units=int(amount),
            fee_units=int(fee),
            fee_payer=payer,
            accepted_at=datetime.fromisoformat(accepted),
            confirm_at=datetime.fromisoformat(confirm),
        )


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: the database's write lock from the start, so what is read
    inside is what is changed (another process waits, up to the busy timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Create the layout in a new file; refuse a foreign or newer one."""
    with immediate(conn):
        application = _pragma(conn, "application_id")
        version = _pragma(conn, "user_version")
        if application == APPLICATION_ID and version == VERSION:
            return
        if application == APPLICATION_ID:
            raise LedgerError(f"{path} has ledger layout version {version}; this is {VERSION}")
        if application != 0 or conn.execute("SELECT 1 FROM sqlite_master").fetchone():
            raise LedgerError(f"{path} is not a walletcore sandbox ledger")
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {VERSION}")


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return int(row[0])


def insert(conn: sqlite3.Connection, tx: LedgerTx) -> None:
    conn.execute(INSERT, tx.values())


def select(conn: sqlite3.Connection, sql: str, parameters: tuple[Any, ...]) -> list[LedgerTx]:
    """The transactions `sql` (`FIND`, `EVERY`, `HISTORY`) reads."""
    return [LedgerTx.of(row) for row in conn.execute(sql, parameters)]


__all__ = [
    "DATA_FILE",
    "EVERY",
    "FIND",
    "HAS_HASH",
    "HISTORY",
    "INSERT",
    "KNOWS",
    "RECEIVED",
    "SHARES",
    "LedgerError",
    "LedgerTx",
    "immediate",
    "insert",
    "prepare",
    "select",
]
