"""The transfer rules: which transactions the ledger accepts, when they confirm, and how one
shows in a wallet's history.

Rules:
- A transaction is accepted only with a valid signature of its sender, and of its fee payer
  when that is someone else, over the transfer's payload (`SignatureVerifier`): a wrong key
  never moves sandbox funds (`TransferRejected`).
- A hash already on the ledger is "already known": accepting it again changes nothing, so a
  re-broadcast of the same signed bytes is harmless.
- The sender holds the amount and the fee payer the fee (in the chain's native coin),
  checked and stored in one write transaction, so a balance checked is the balance spent;
  short: `InsufficientFunds`, nothing stored.
- A transaction confirms `confirm` after it was accepted, read from the clock (no timers);
  its `date` (block time) is that instant.
- Faucet credits (`walletcore sandbox fund`) have no sender and are confirmed at once.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from walletcore.domain.errors import InsufficientFunds, TransferRejected
from walletcore.domain.wallet import TxRow
from walletcore.ports import SignatureVerifier
from walletcore_sandbox.ledger.balances import Holding, balance
from walletcore_sandbox.ledger.store import HAS_HASH, LedgerTx, immediate, insert


def check_signatures(
    tx: LedgerTx, payload: bytes, signatures: Mapping[str, bytes], verify: SignatureVerifier
) -> None:
    """`TransferRejected` unless the sender and the fee payer signed `payload`."""
    assert tx.sender is not None and tx.fee_payer is not None
    for signer in {tx.sender, tx.fee_payer}:
        signature = signatures.get(signer)
        if signature is None or not verify(tx.chain, signer, payload, signature):
            raise TransferRejected(
                "Transfer rejected by the network: the signature does not match the "
                "sending address; nothing was sent"
            )


def needs(tx: LedgerTx, native_id: int) -> Counter[tuple[str, int]]:
    """(address, asset id) -> the units a transfer takes from it: the amount from the
    sender, the fee (the native coin, `native_id`) from the fee payer."""
    assert tx.sender is not None and tx.fee_payer is not None
    taken: Counter[tuple[str, int]] = Counter()
    taken[(tx.sender, tx.asset_id)] += tx.amount_units
    taken[(tx.fee_payer, native_id)] += tx.fee_units
    return taken


def accept(
    conn: sqlite3.Connection,
    tx: LedgerTx,
    taken: Counter[tuple[str, int]],
    native_id: int,
    clock: Callable[[], datetime],
    confirm: timedelta,
) -> bool:
    """On the writer: store `tx` if its hash is new and every payer holds what it takes
    (`needs`), accepted at the clock's instant once the write lock is held; False when its
    hash was there already."""
    with immediate(conn):
        if conn.execute(HAS_HASH, (tx.tx_hash,)).fetchone() is not None:
            return False
        now = clock()
        for (address, asset_id), units in taken.items():
            holding = (tx.chain, address, asset_id, asset_id == native_id)
            if balance(conn, None, holding, now) < units:
                raise InsufficientFunds(
                    "Insufficient balance at broadcast: the network refused the "
                    "transfer; nothing was sent"
                )
        insert(conn, replace(tx, accepted_at=now, confirm_at=now + confirm))
        return True


def credit(
    conn: sqlite3.Connection,
    holding: Holding,
    units: int,
    tx_hash: str,
    clock: Callable[[], datetime],
) -> int:
    """On the writer: a faucet credit of `units` to the holding (chain, address, asset),
    confirmed at once (the clock's instant once the write lock is held); the address's new
    balance of the asset."""
    chain, address, asset_id, _ = holding
    with immediate(conn):
        now = clock()
        insert(conn, LedgerTx(tx_hash, chain, asset_id, None, address, units, 0, None, now, now))
        return balance(conn, None, holding, now)


def row_of(tx: LedgerTx, address: str, now: datetime) -> TxRow:
    """`tx` as `address`'s history shows it at `now`: pending until it confirms."""
    confirmed = tx.confirmed(now)
    return TxRow(
        hash=tx.tx_hash,
        type="send" if tx.sender == address else "receive",
        amount_units=tx.amount_units,
        fee_units=tx.fee_units,
        status="success" if confirmed else "pending",
        date=tx.confirm_at if confirmed else None,
    )


__all__ = ["accept", "check_signatures", "credit", "needs", "row_of"]
