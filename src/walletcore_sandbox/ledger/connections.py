"""The ledger file's connections in one process: one writer, used from a worker thread, and
a read-only reader per thread that reads.

The server's workers and the operator CLI (`walletcore sandbox fund`) are separate processes
on one file, created 0600 in a 0700 folder. Readers never block the writer (WAL); a change
takes the database's write lock (`store.immediate`), and a process that finds the lock
taken waits for it (busy timeout). A commit survives the death of its process
(`synchronous=NORMAL` in WAL mode; a power cut may lose the last ones, which is fine for a
sandbox). A change may wait for the lock, so it runs in a worker thread
(`asyncio.to_thread`), one at a time per ledger. A read never waits in WAL mode: it runs on
the calling thread (the event loop's) on a read-only connection of that thread, with no busy
timeout; the rare read the database makes busy (a WAL recovery) goes to the worker thread
instead. A thread hop per balance read cost a sell up to a GIL switch interval (5 ms) under
load (docs/performance.md). Each reader keeps the shares it read (`balances.Seen`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from walletcore.secretfiles import private_file
from walletcore_sandbox.ledger.balances import Seen
from walletcore_sandbox.ledger.store import LedgerError, prepare

#: Seconds a process waits for another's write lock before giving up.
BUSY_TIMEOUT_SECONDS = 30.0

T = TypeVar("T")

#: `Connections.read_now`'s answer when the work must run in the worker thread.
LATER = object()


class Connections:
    """The writer (opened on first use, the file made and its layout checked then) and the
    readers of one ledger file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # one statement at a time on the writer
        self._conn: sqlite3.Connection | None = None
        #: the read-only connection of each thread that reads inline, once the file exists
        self._readers = threading.local()
        #: every reader connection opened (closed by `close`) -> the shares it read while
        #: the ledger is unchanged
        self.seen: dict[sqlite3.Connection, Seen] = {}
        self._prepared = False

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on this thread's read-only connection; in the worker thread when the
        database is busy (never a wait on the event loop)."""
        if not self._prepared:
            await self.run(lambda conn: None)  # the file exists and has its layout
        found = self.read_now(work)
        return await self.run(work) if found is LATER else found  # type: ignore[return-value]

    def read_now(self, work: Callable[[sqlite3.Connection], T]) -> T | object:
        """`work` on this thread's read-only connection, with no await; `LATER` when it
        cannot run here (the file is not made yet, or the database is busy): `read` then
        runs it. A balance read on every sell and its approval calls this first."""
        if not self._prepared:
            return LATER
        reader = getattr(self._readers, "conn", None)
        if reader is None:
            reader = self._readers.conn = self._open_reader()
        try:
            return work(reader)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            return LATER

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the writer, in the worker thread (it may wait for the write lock)."""
        return await asyncio.to_thread(self._locked, work)

    def close(self) -> None:
        """Close every connection; the next use opens them again."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            readers, self.seen = self.seen, {}
            for reader in readers:
                reader.close()
            self._readers = threading.local()

    def _open_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        with self._lock:
            self.seen[conn] = Seen(conn)
        return conn

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
            prepare(conn, self.path)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                raise LedgerError(f"{self.path} is not a walletcore sandbox ledger") from exc
            raise
        return conn


def _busy(exc: sqlite3.OperationalError) -> bool:
    """The database was locked or busy: the read goes to the worker thread (`run`)."""
    return "locked" in str(exc) or "busy" in str(exc)


__all__ = ["BUSY_TIMEOUT_SECONDS", "LATER", "Connections"]
