"""The sandbox chains' ledger: every sandbox transaction of every chain, in one SQLite file.

It stands in for the networks on the sandbox profile. The server's workers and the operator
CLI (`walletcore sandbox fund`) are separate processes, so the ledger is a database they all
open: `WALLETCORE_HOME/sandbox-chain.db` (stdlib `sqlite3`, created 0600 in a 0700 folder).
Readers never block the writer (WAL); a change is one `BEGIN IMMEDIATE` transaction (checks
and insert under the database's write lock, so a balance checked is the balance spent), and
a process that finds the lock taken waits for it (busy timeout). A commit survives the death
of its process (`synchronous=NORMAL` in WAL mode; a power cut may lose the last ones, which
is fine for a sandbox). A change may wait for the lock, so it runs in a worker thread
(`asyncio.to_thread`), one at a time per ledger. A read never waits in WAL mode: it runs on
the calling thread (the event loop's) on a read-only connection of that thread, with no
busy timeout; the rare read the database makes busy (a WAL recovery) goes to the worker
thread instead. A thread hop per balance read cost a sell up to a GIL switch interval (5 ms)
under load (docs/performance.md). A reader connection serves an address's shares (what a
balance is summed from) again while the ledger is unchanged since it read them: `PRAGMA
data_version` moves with every commit of any other connection, in any process, and is read
before each balance (`_Seen`; docs/performance.md, "Caches, and why each is safe"). The
balance itself is summed each time, at the clock's instant, so a credit confirms on time.

Rules:
- A transaction is accepted only with a valid signature of its sender, and of its fee payer
  when that is someone else, over the transfer's payload (`SignatureVerifier`): a wrong key
  never moves sandbox funds.
- A hash already on the ledger is "already known": accepting it again changes nothing, so a
  re-broadcast of the same signed bytes is harmless.
- Balances are computed from the transactions: an outgoing amount and its fee leave the
  payer at once (pending or not); an incoming amount counts once the transaction is
  confirmed. A transaction confirms `confirm_seconds` after it was accepted, read from the
  clock (no timers); its `date` (block time) is that instant.
- Faucet credits (`fund`) have no sender and are confirmed at once.

Amounts are stored as decimal text: base units overflow SQLite's 64-bit integers (100 ETH
is 10^20 wei).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from walletcore.domain.assets import Chain, native_asset
from walletcore.domain.errors import InsufficientFunds, TransferRejected
from walletcore.domain.times import utc
from walletcore.domain.wallet import TxRow
from walletcore.ports import Clock, SignatureVerifier
from walletcore.secretfiles import private_file

DATA_FILE = "sandbox-chain.db"
#: `PRAGMA application_id` of a ledger file ("WCSL"): a foreign SQLite file is refused.
APPLICATION_ID = 0x5743534C
#: `PRAGMA user_version`: the layout below.
VERSION = 1
#: Seconds a process waits for another's write lock before giving up.
BUSY_TIMEOUT_SECONDS = 30.0

_SCHEMA = (
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
_COLUMNS = (
    "tx_hash, chain, asset_id, sender, recipient, amount_units, fee_units, fee_payer, "
    "accepted_at, confirm_at"
)
_INSERT = f"INSERT INTO txs ({_COLUMNS}) VALUES ({', '.join('?' * (_COLUMNS.count(',') + 1))})"
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
_SHARES = (
    "SELECT 0, amount_units, confirm_at FROM txs "
    "WHERE chain = ?1 AND recipient = ?2 AND asset_id = ?3 "
    "UNION ALL SELECT 1, amount_units, NULL FROM txs "
    "WHERE chain = ?1 AND sender = ?2 AND asset_id = ?3 "
    "UNION ALL SELECT 2, fee_units, NULL FROM txs WHERE ?4 AND chain = ?1 AND fee_payer = ?2"
)
#: (chain, address, asset id): an address's holding of one asset, whose shares are read.
Holding = tuple[Chain, str, int]
#: One row of `_SHARES`, read: (role, units, when a credit confirms; None for a debit).
Share = tuple[int, int, datetime | None]
#: The reader connection's count of the commits it has seen from other connections.
_DATA_VERSION = "PRAGMA data_version"
#: Addresses' shares a reader connection keeps while the ledger is unchanged (all are
#: dropped at the next change; past this many, at the next new address).
SHARES_SEEN = 4096
#: ?1 chain, ?2 address: a row when it took part in any transaction.
_KNOWS = (
    "SELECT 1 FROM txs WHERE chain = ?1 AND recipient = ?2 "
    "UNION ALL SELECT 1 FROM txs WHERE chain = ?1 AND sender = ?2 "
    "UNION ALL SELECT 1 FROM txs WHERE chain = ?1 AND fee_payer = ?2 LIMIT 1"
)
#: ?1 chain, ?2 address, ?3 asset, ?4 limit: its transactions of the asset, newest first.
_HISTORY = (
    f"SELECT {_COLUMNS} FROM ("
    f"SELECT seq, {_COLUMNS} FROM txs WHERE chain = ?1 AND recipient = ?2 AND asset_id = ?3 "
    f"UNION SELECT seq, {_COLUMNS} FROM txs WHERE chain = ?1 AND sender = ?2 AND asset_id = ?3"
    ") ORDER BY seq DESC LIMIT ?4"
)

T = TypeVar("T")


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
        """The row's values, in `_COLUMNS` order."""
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
        """A transaction from its row (`_COLUMNS` order)."""
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


def row_of(tx: LedgerTx, address: str, now: datetime) -> TxRow:
    confirmed = tx.confirmed(now)
    return TxRow(
        hash=tx.tx_hash,
        type="send" if tx.sender == address else "receive",
        amount_units=tx.amount_units,
        fee_units=tx.fee_units,
        status="success" if confirmed else "pending",
        date=tx.confirm_at if confirmed else None,
    )


class SandboxLedger:
    """The shared ledger: one connection per ledger object, opened on first use."""

    def __init__(
        self,
        path: Path,
        clock: Clock,
        verify: SignatureVerifier,
        confirm_seconds: float = 3.0,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._verify = verify
        self._confirm = timedelta(seconds=confirm_seconds)
        self._lock = threading.Lock()  # one statement at a time on the connection
        self._conn: sqlite3.Connection | None = None
        #: the read-only connection of each thread that reads inline, once the file exists
        self._readers = threading.local()
        #: every reader connection opened (closed by `aclose`) -> the shares it read while
        #: the ledger is unchanged
        self._seen: dict[sqlite3.Connection, _Seen] = {}
        self._prepared = False

    def __repr__(self) -> str:
        return f"SandboxLedger({str(self.path)!r})"

    def now(self) -> datetime:
        return utc(self._clock.now())

    # -- reading ----------------------------------------------------------------------
    async def balance(self, chain: Chain, address: str, asset_id: int) -> int:
        """What `address` can spend: confirmed credits, minus every debit and fee paid."""
        now = self.now()
        seen = self._seen
        return await self._read(
            lambda conn: _balance(conn, seen.get(conn), (chain, address, asset_id), now)
        )

    async def known_balance(self, chain: Chain, address: str, asset_id: int) -> int | None:
        """`balance`, or None when `address` took part in no transaction on `chain` (what
        `knows` answers), in one read: on this thread's reader with no await when it can
        (every sell and its approval reads one), else as `_read` does."""
        now = self.now()
        seen = self._seen
        holding = (chain, address, asset_id)

        def work(conn: sqlite3.Connection) -> int | None:
            return _known_balance(conn, seen.get(conn), holding, now)

        found = self._read_now(work)
        return await self._read(work) if found is _LATER else found  # type: ignore[return-value]

    async def knows(self, chain: Chain, address: str) -> bool:
        """Whether `address` took part in any transaction on `chain` (an indexer knows it)."""
        return await self._exists(_KNOWS, (chain.value, address))

    async def has_received(self, chain: Chain, address: str, asset_id: int) -> bool:
        """Whether `address` ever received `asset_id` (it has a token account / holds it)."""
        return await self._exists(
            "SELECT 1 FROM txs WHERE chain = ? AND recipient = ? AND asset_id = ? LIMIT 1",
            (chain.value, address, asset_id),
        )

    async def history(self, chain: Chain, address: str, asset_id: int, limit: int) -> list[TxRow]:
        """This wallet's transactions of the asset, newest first, at most `limit`."""
        now = self.now()
        found = await self._select(_HISTORY, (chain.value, address, asset_id, max(0, limit)))
        return [row_of(tx, address, now) for tx in found]

    async def find(self, tx_hash: str) -> LedgerTx | None:
        found = await self._select(f"SELECT {_COLUMNS} FROM txs WHERE tx_hash = ?", (tx_hash,))
        return found[0] if found else None

    async def transactions(self) -> list[LedgerTx]:
        """Every transaction, in the order they were accepted."""
        return await self._select(f"SELECT {_COLUMNS} FROM txs ORDER BY seq", ())

    # -- changing ---------------------------------------------------------------------
    async def accept(self, tx: LedgerTx, payload: bytes, signatures: Mapping[str, bytes]) -> bool:
        """Put a signed transfer on the ledger; False when its hash was there already.

        Raises `TransferRejected` (a missing or wrong signature) or `InsufficientFunds`:
        nothing is stored then.
        """
        assert tx.sender is not None and tx.fee_payer is not None
        for signer in {tx.sender, tx.fee_payer}:
            signature = signatures.get(signer)
            if signature is None or not self._verify(tx.chain, signer, payload, signature):
                raise TransferRejected(
                    "Transfer rejected by the network: the signature does not match the "
                    "sending address; nothing was sent"
                )
        native_id = native_asset(tx.chain).id
        needs: Counter[tuple[str, int]] = Counter()
        needs[(tx.sender, tx.asset_id)] += tx.amount_units
        needs[(tx.fee_payer, native_id)] += tx.fee_units

        def change(conn: sqlite3.Connection) -> bool:
            with _immediate(conn):
                known = conn.execute("SELECT 1 FROM txs WHERE tx_hash = ?", (tx.tx_hash,))
                if known.fetchone() is not None:
                    return False
                now = self.now()
                for (address, asset_id), units in needs.items():
                    if _balance(conn, None, (tx.chain, address, asset_id), now) < units:
                        raise InsufficientFunds(
                            "Insufficient balance at broadcast: the network refused the "
                            "transfer; nothing was sent"
                        )
                _insert(conn, replace(tx, accepted_at=now, confirm_at=now + self._confirm))
                return True

        return await self._run(change)

    async def credit(
        self, chain: Chain, address: str, asset_id: int, units: int, tx_hash: str
    ) -> int:
        """A faucet credit, confirmed at once; the address's new balance of the asset."""

        def change(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                now = self.now()
                tx = LedgerTx(tx_hash, chain, asset_id, None, address, units, 0, None, now, now)
                _insert(conn, tx)
                return _balance(conn, None, (chain, address, asset_id), now)

        return await self._run(change)

    async def aclose(self) -> None:
        """Close the connection; the next call opens it again."""
        await asyncio.to_thread(self._close)

    # -- the connection ---------------------------------------------------------------
    async def _exists(self, sql: str, parameters: tuple[Any, ...]) -> bool:
        return await self._read(lambda conn: conn.execute(sql, parameters).fetchone() is not None)

    async def _select(self, sql: str, parameters: tuple[Any, ...]) -> list[LedgerTx]:
        return await self._read(
            lambda conn: [LedgerTx.of(row) for row in conn.execute(sql, parameters)]
        )

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on this thread's read-only connection; in the worker thread when the
        database is busy (never a wait on the event loop)."""
        if not self._prepared:
            await self._run(lambda conn: None)  # the file exists and has its layout
        found = self._read_now(work)
        return await self._run(work) if found is _LATER else found  # type: ignore[return-value]

    def _read_now(self, work: Callable[[sqlite3.Connection], T]) -> T | object:
        """`work` on this thread's read-only connection, with no await; `_LATER` when it
        cannot run here (the file is not made yet, or the database is busy): `_read`
        then runs it. A balance read on every sell and its approval calls this first."""
        if not self._prepared:
            return _LATER
        reader = getattr(self._readers, "conn", None)
        if reader is None:
            reader = self._readers.conn = self._open_reader()
        try:
            return work(reader)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            return _LATER

    def _open_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        with self._lock:
            self._seen[conn] = _Seen(conn)
        return conn

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._locked, work)

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
                self._prepared = True
            return work(self._conn)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            private_file(self.path),
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,  # transactions are begun explicitly
            check_same_thread=False,  # used from worker threads, one at a time (`_lock`)
        )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            _prepare(conn, self.path)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                raise LedgerError(f"{self.path} is not a walletcore sandbox ledger") from exc
            raise
        return conn

    def _close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            readers, self._seen = self._seen, {}
            for reader in readers:
                reader.close()
            self._readers = threading.local()


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: the database's write lock from the start, so what is read
    inside is what is changed (another process waits, up to the busy timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Create the layout in a new file; refuse a foreign or newer one."""
    with _immediate(conn):
        application = _pragma(conn, "application_id")
        version = _pragma(conn, "user_version")
        if application == APPLICATION_ID and version == VERSION:
            return
        if application == APPLICATION_ID:
            raise LedgerError(f"{path} has ledger layout version {version}; this is {VERSION}")
        if application != 0 or conn.execute("SELECT 1 FROM sqlite_master").fetchone():
            raise LedgerError(f"{path} is not a walletcore sandbox ledger")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {VERSION}")


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return int(row[0])


def _insert(conn: sqlite3.Connection, tx: LedgerTx) -> None:
    conn.execute(_INSERT, tx.values())


class _Seen:
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
            found = shares[holding] = tuple(_shares(conn, holding))
        return found


#: `SandboxLedger._read_now`'s answer when the work must run in the worker thread.
_LATER = object()


def _busy(exc: sqlite3.OperationalError) -> bool:
    """The database was locked or busy: the read goes to the worker thread (`_run`)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _shares_through(
    conn: sqlite3.Connection, seen: _Seen | None, holding: Holding
) -> Sequence[Share]:
    return _shares(conn, holding) if seen is None else seen.shares_of(conn, holding)


def _balance(conn: sqlite3.Connection, seen: _Seen | None, holding: Holding, now: datetime) -> int:
    return _total(_shares_through(conn, seen, holding), now)


def _known_balance(
    conn: sqlite3.Connection, seen: _Seen | None, holding: Holding, now: datetime
) -> int | None:
    """`_balance`, or None when the address took part in no transaction on `chain`: it has
    shares of this asset, or else `_KNOWS` tells (the rare case: none of this asset)."""
    shares = _shares_through(conn, seen, holding)
    chain, address, _ = holding
    if not shares and conn.execute(_KNOWS, (chain.value, address)).fetchone() is None:
        return None
    return _total(shares, now)


def _shares(conn: sqlite3.Connection, holding: Holding) -> list[Share]:
    """The address's shares in the asset on the chain (`_SHARES`), read: units as integers,
    a credit's confirmation as an instant (once per read of the rows, not per balance a
    reader's kept shares serve)."""
    chain, address, asset_id = holding
    native = int(asset_id == native_asset(chain).id)
    return [
        (role, int(units), None if confirm_at is None else datetime.fromisoformat(confirm_at))
        for role, units, confirm_at in conn.execute(
            _SHARES, (chain.value, address, asset_id, native)
        )
    ]


def _total(shares: Iterable[Share], now: datetime) -> int:
    """Confirmed credits, minus every debit and every fee paid."""
    total = 0
    for role, units, confirm_at in shares:
        if role == 0:
            if confirm_at is not None and now >= confirm_at:
                total += units
        else:
            total -= units
    return total


__all__ = [
    "DATA_FILE",
    "LedgerError",
    "LedgerTx",
    "SandboxLedger",
    "row_of",
]
