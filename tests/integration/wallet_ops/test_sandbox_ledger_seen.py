"""A reader connection of the sandbox ledger serves an address's shares again only while
no connection, of this process or another, has committed since it read them (`balances.Seen`,
`PRAGMA data_version`; docs/performance.md, "Caches, and why each is safe"): a balance is
never stale."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from walletcore.clock import ManualClock, SystemClock
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InsufficientFunds
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.ledger import DATA_FILE, SHARES_SEEN, LedgerTx, SandboxLedger

ALICE = "0x52908400098527886E0F7030069857D2E4169EE7"
BOB = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"


def ledger_at(path: Path, clock: ManualClock) -> SandboxLedger:
    return SandboxLedger(
        path, clock, lambda *_: True, confirm_seconds=3.0, catalog=CONTRACT_CATALOG
    )


class Statements:
    """The share queries the ledger's reader connections run (their trace)."""

    def __init__(self, ledger: SandboxLedger) -> None:
        self.shares = 0
        for conn in ledger._connections.seen:
            conn.set_trace_callback(self.traced)

    def traced(self, sql: str) -> None:
        if "UNION ALL SELECT 1, amount_units" in sql:
            self.shares += 1


async def test_an_unchanged_ledger_serves_the_shares_read_before(
    tmp_path: Path, clock: ManualClock
) -> None:
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    assert await ledger.known_balance(Chain.ETHEREUM, ALICE, 2) == 1000
    trace = Statements(ledger)
    for _ in range(5):
        assert await ledger.known_balance(Chain.ETHEREUM, ALICE, 2) == 1000
        assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000
    assert trace.shares == 0  # all ten from what was read
    assert await ledger.known_balance(Chain.ETHEREUM, BOB, 2) is None  # another address reads
    assert trace.shares == 1
    await ledger.aclose()


async def test_this_ledgers_own_commit_is_seen_at_once(tmp_path: Path, clock: ManualClock) -> None:
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000
    now = clock.now()
    spend = LedgerTx("0x1", Chain.ETHEREUM, 2, ALICE, BOB, 600, 21, ALICE, now, now)
    assert await ledger.accept(spend, b"p", {ALICE: b"s"})
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000 - 600 - 21
    await ledger.aclose()


async def test_another_connections_commit_is_seen_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A commit by another ledger object on the file (another connection) and by a bare
    connection: each is seen by the next read."""
    path = tmp_path / DATA_FILE
    ledger, other = ledger_at(path, clock), ledger_at(path, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000
    await other.credit(Chain.ETHEREUM, ALICE, 2, 5, "b" * 64)
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1005
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("DELETE FROM txs WHERE tx_hash = ?", ("a" * 64,))
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 5
    await ledger.aclose()
    await other.aclose()


SPENDER = """
import asyncio, sys
from pathlib import Path
from walletcore.clock import SystemClock
from walletcore.domain.assets import Chain
from walletcore_sandbox.ledger import SandboxLedger
from walletcore.testing import CONTRACT_CATALOG

async def main() -> None:
    ledger = SandboxLedger(Path(sys.argv[1]), SystemClock(), lambda *_: True, catalog=CONTRACT_CATALOG)
    await ledger.credit(Chain.ETHEREUM, sys.argv[2], 2, 7, sys.argv[3])
    await ledger.aclose()

asyncio.run(main())
"""


async def test_another_processs_commit_is_seen_at_once(tmp_path: Path) -> None:
    path = tmp_path / DATA_FILE
    # the system's clock, as the other process's: its credit is confirmed by now
    ledger = SandboxLedger(path, SystemClock(), lambda *_: True, catalog=CONTRACT_CATALOG)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    for n in range(3):
        assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000 + 7 * n
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SPENDER, str(path), ALICE, f"{n:064x}"
        )
        assert await child.wait() == 0
        assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000 + 7 * (n + 1)
    await ledger.aclose()


async def test_a_credit_confirms_on_time_with_no_commit_in_between(
    tmp_path: Path, clock: ManualClock
) -> None:
    """What is kept is the shares, not the sum: a pending credit counts once the clock
    passes its confirmation, though nothing was committed since."""
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    now = clock.now()
    spend = LedgerTx("0x1", Chain.ETHEREUM, 2, ALICE, BOB, 600, 0, ALICE, now, now)
    assert await ledger.accept(spend, b"p", {ALICE: b"s"})
    assert await ledger.balance(Chain.ETHEREUM, BOB, 2) == 0  # pending
    trace = Statements(ledger)
    clock.advance(2.9)
    assert await ledger.balance(Chain.ETHEREUM, BOB, 2) == 0
    clock.advance(0.1)
    assert await ledger.balance(Chain.ETHEREUM, BOB, 2) == 600
    assert trace.shares == 0  # both from the shares read while pending
    await ledger.aclose()


async def test_what_a_reader_keeps_is_bounded(tmp_path: Path, clock: ManualClock) -> None:
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1, "a" * 64)
    for n in range(SHARES_SEEN + 10):
        await ledger.balance(Chain.ETHEREUM, f"0x{n:040x}", 2)
    (seen,) = ledger._connections.seen.values()
    assert 0 < len(seen.shares) <= SHARES_SEEN
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1
    await ledger.aclose()
    assert ledger._connections.seen == {}


async def test_the_writers_spend_check_reads_the_rows(tmp_path: Path, clock: ManualClock) -> None:
    """The check of a spend under the write lock never uses what a reader kept: two spends
    of 600 out of 1000, the second one refused though a reader saw 1000 before either."""
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "a" * 64)
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 1000
    now = clock.now()
    first = LedgerTx("0x1", Chain.ETHEREUM, 2, ALICE, BOB, 600, 0, ALICE, now, now)
    second = LedgerTx("0x2", Chain.ETHEREUM, 2, ALICE, BOB, 600, 0, ALICE, now, now)
    assert await ledger.accept(first, b"p", {ALICE: b"s"})
    try:
        await ledger.accept(second, b"p", {ALICE: b"s"})
    except InsufficientFunds:
        refused = True
    else:
        refused = False
    assert refused
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 400
    await ledger.aclose()
