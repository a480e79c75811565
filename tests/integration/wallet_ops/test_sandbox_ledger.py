"""The sandbox ledger's database: a private SQLite file shared by processes, whose write
transactions never let two processes spend the same coins, and that refuses a file it did
not create."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InsufficientFunds
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.ledger import DATA_FILE, LedgerError, LedgerTx, SandboxLedger

ALICE = "0x52908400098527886E0F7030069857D2E4169EE7"
BOB = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"
SIGNED = {ALICE: b"signature"}


def ledger_at(path: Path, clock: ManualClock, confirm_seconds: float = 3.0) -> SandboxLedger:
    return SandboxLedger(
        path, clock, lambda *_: True, confirm_seconds=confirm_seconds, catalog=CONTRACT_CATALOG
    )


def transfer(tx_hash: str, amount: int, fee: int = 0) -> LedgerTx:
    now = ManualClock().now()
    return LedgerTx(tx_hash, Chain.ETHEREUM, 2, ALICE, BOB, amount, fee, ALICE, now, now)


async def test_the_file_is_private_and_written_ahead(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "home" / DATA_FILE
    ledger = ledger_at(path, clock)
    assert not path.exists()  # nothing is opened before the first call
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 5, "f" * 64)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    await ledger.aclose()


async def test_amounts_beyond_64_bits_and_the_rules_of_balances(
    tmp_path: Path, clock: ManualClock
) -> None:
    ledger = ledger_at(tmp_path / DATA_FILE, clock)
    thousand_eth = 1000 * 10**18  # more than SQLite's integers hold
    assert await ledger.credit(Chain.ETHEREUM, ALICE, 2, thousand_eth, "a" * 64) == thousand_eth
    assert await ledger.accept(transfer("0x1", 10**20, fee=21_000), b"p", SIGNED)
    assert not await ledger.accept(transfer("0x1", 10**20, fee=21_000), b"p", SIGNED)  # known
    # the amount and its fee leave at once; the recipient has it once it is confirmed
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == thousand_eth - 10**20 - 21_000
    assert await ledger.balance(Chain.ETHEREUM, BOB, 2) == 0
    assert [r.status for r in await ledger.history(Chain.ETHEREUM, BOB, 2, 10)] == ["pending"]
    clock.advance(3)
    assert await ledger.balance(Chain.ETHEREUM, BOB, 2) == 10**20
    rows = await ledger.history(Chain.ETHEREUM, ALICE, 2, 10)
    assert [(r.type, r.status) for r in rows] == [("send", "success"), ("receive", "success")]
    assert await ledger.history(Chain.ETHEREUM, ALICE, 2, 1) == rows[:1]
    assert await ledger.knows(Chain.ETHEREUM, BOB) and not await ledger.knows(Chain.BSC, BOB)
    assert await ledger.has_received(Chain.ETHEREUM, BOB, 2)
    assert not await ledger.has_received(Chain.ETHEREUM, BOB, 21)
    found = await ledger.find("0x1")
    assert found is not None and found.amount_units == 10**20
    assert found.confirm_at - found.accepted_at == timedelta(seconds=3)
    assert [t.tx_hash for t in await ledger.transactions()] == ["a" * 64, "0x1"]
    with pytest.raises(InsufficientFunds):
        await ledger.accept(transfer("0x2", thousand_eth), b"p", SIGNED)
    assert await ledger.find("0x2") is None  # nothing stored
    await ledger.aclose()
    # closed, then opened again on the next call; another ledger object sees the same
    assert await ledger.find("0x1") == found
    other = ledger_at(tmp_path / DATA_FILE, clock)
    assert await other.transactions() == await ledger.transactions()
    await other.aclose()
    await ledger.aclose()


SPENDER = """
import asyncio, sys
from pathlib import Path
from walletcore.clock import SystemClock
from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore.domain.errors import InsufficientFunds
from walletcore_sandbox.ledger import LedgerTx, SandboxLedger

ALICE, BOB = sys.argv[2], sys.argv[3]


async def main(path, tx_hash):
    ledger = SandboxLedger(path, SystemClock(), lambda *_: True, catalog=CONTRACT_CATALOG)
    now = SystemClock().now()
    tx = LedgerTx(tx_hash, Chain.ETHEREUM, 2, ALICE, BOB, 600, 0, ALICE, now, now)
    try:
        await ledger.accept(tx, b"p", {ALICE: b"s"})
        print("SPENT")
    except InsufficientFunds:
        print("REFUSED")

asyncio.run(main(Path(sys.argv[1]), sys.argv[4]))
"""


async def test_processes_never_spend_the_same_coins_twice(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Each of several processes spends 600 of Alice's 1000 at once: one succeeds."""
    path = tmp_path / DATA_FILE
    ledger = ledger_at(path, clock)
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 1000, "c" * 64)
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SPENDER,
            str(path),
            ALICE,
            BOB,
            f"0x{n:064x}",
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(6)
    ]
    outcomes = sorted([(await child.communicate())[0].decode().strip() for child in children])
    assert outcomes == ["REFUSED"] * 5 + ["SPENT"], outcomes
    assert await ledger.balance(Chain.ETHEREUM, ALICE, 2) == 400
    await ledger.aclose()


async def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all, just some bytes" * 100)
    with pytest.raises(LedgerError, match="not a walletcore sandbox ledger"):
        await ledger_at(garbage, clock).balance(Chain.ETHEREUM, ALICE, 2)

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(LedgerError, match="not a walletcore sandbox ledger"):
        await ledger_at(foreign, clock).balance(Chain.ETHEREUM, ALICE, 2)

    newer = tmp_path / DATA_FILE
    ledger = ledger_at(newer, clock)
    await ledger.balance(Chain.ETHEREUM, ALICE, 2)
    await ledger.aclose()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(LedgerError, match="layout version 99"):
        await ledger_at(newer, clock).balance(Chain.ETHEREUM, ALICE, 2)


async def test_an_addresss_reads_search_indexes_never_the_whole_ledger(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A balance, `knows` and a history read one address's transactions through the
    indexes of its roles, with or without the planner's statistics: an `OR` of the roles
    was a scan of every transaction, so each balance check grew with the whole ledger."""
    from walletcore_sandbox.ledger import store

    path = tmp_path / DATA_FILE
    ledger = ledger_at(path, clock)
    for n in range(50):
        await ledger.credit(Chain.ETHEREUM, f"0x{n:040x}", 2, 10**18, f"{n:064x}")
    await ledger.credit(Chain.ETHEREUM, ALICE, 2, 10**18, "a" * 64)
    assert await ledger.accept(transfer("0x1", 10**17, fee=21_000), b"p", SIGNED)
    await ledger.aclose()
    reads = {
        "shares": (store.SHARES, (Chain.ETHEREUM.value, ALICE, 2, 1)),
        "knows": (store.KNOWS, (Chain.ETHEREUM.value, ALICE)),
        "history": (store.HISTORY, (Chain.ETHEREUM.value, ALICE, 2, 10)),
    }
    with sqlite3.connect(path) as db:
        for analyzed in (False, True):
            if analyzed:
                db.execute("ANALYZE")
            for name, (sql, parameters) in reads.items():
                plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", parameters)]
                assert not [step for step in plan if step.startswith("SCAN txs")], (name, plan)
                searches = [step for step in plan if step.startswith("SEARCH txs USING")]
                assert len(searches) == (2 if name == "history" else 3), (name, plan)


def _folded_balance(
    rows: list[LedgerTx], chain: Chain, address: str, asset_id: int, now: datetime
) -> int:
    """The rules of a balance, folded over every transaction of the ledger one by one."""
    native = CONTRACT_CATALOG.native_asset(chain).id
    total = 0
    for tx in rows:
        if tx.chain != chain:
            continue
        if tx.asset_id == asset_id and tx.recipient == address and now >= tx.confirm_at:
            total += tx.amount_units
        if tx.asset_id == asset_id and tx.sender == address:
            total -= tx.amount_units
        if asset_id == native and tx.fee_payer == address:
            total -= tx.fee_units
    return total


_PARTIES = ["0xa", "0xb", "0xc"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    txs=st.lists(
        st.tuples(
            st.sampled_from([Chain.ETHEREUM, Chain.BSC]),
            st.sampled_from([2, 3, 6]),  # ETH (native on ETHEREUM), two tokens
            st.sampled_from([None, *_PARTIES]),  # sender (None: a faucet credit)
            st.sampled_from(_PARTIES),  # recipient (itself too: a self-transfer)
            st.integers(0, 10**30),
            st.integers(0, 10**6),
            st.sampled_from([None, *_PARTIES]),  # fee payer
            st.integers(-5, 5),  # confirmed this many seconds from now
        ),
        max_size=25,
    )
)
def test_a_balance_is_every_role_of_every_transaction_counted_once(
    tmp_path_factory: pytest.TempPathFactory, txs: list[tuple[Any, ...]]
) -> None:
    """Balances read through the per-role index searches (`store.SHARES`) are the rules folded
    over the whole ledger: received once confirmed, sent, and (of the native coin) the fees
    paid, for a self-transfer and a sender paying its own fee too; `known_balance` is None
    exactly for an address that took part in nothing on the chain."""
    from walletcore_sandbox.ledger import balances, store

    now = ManualClock().now()
    rows = [
        LedgerTx(
            f"{n:064x}",
            chain,
            asset,
            sender,
            recipient,
            amount,
            fee,
            payer,
            now,
            now + timedelta(seconds=confirm),
        )
        for n, (chain, asset, sender, recipient, amount, fee, payer, confirm) in enumerate(txs)
    ]
    path = tmp_path_factory.mktemp("ledger") / DATA_FILE
    with sqlite3.connect(path) as db:
        store.prepare(db, path)  # the ledger's own layout
        for tx in rows:
            store.insert(db, tx)
    with sqlite3.connect(path) as db:
        for chain in (Chain.ETHEREUM, Chain.BSC):
            for address in [*_PARTIES, "0xd"]:
                took_part = any(
                    tx.chain == chain and address in (tx.sender, tx.recipient, tx.fee_payer)
                    for tx in rows
                )
                for asset in (2, 3, 6):
                    want = _folded_balance(rows, chain, address, asset, now)
                    native = asset == CONTRACT_CATALOG.native_asset(chain).id
                    holding = (chain, address, asset, native)
                    assert balances.balance(db, None, holding, now) == want
                    known = balances.known_balance(db, None, holding, now)
                    assert known == (want if took_part else None)
