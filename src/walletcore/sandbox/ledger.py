"""The sandbox chains' ledger: every sandbox transaction of every chain, in one JSON file.

It stands in for the networks on the sandbox profile. The server and the operator CLI
(`walletcore sandbox fund`) are separate processes, so the ledger lives in
`WALLETCORE_HOME/sandbox-chain.json` (a `JsonFile`: locked read-modify-write, atomic
replacement), shared by all of them.

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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from walletcore.domain.assets import Chain, native_asset
from walletcore.domain.errors import InsufficientFunds, TransferRejected
from walletcore.domain.wallet import TxRow
from walletcore.ports import Clock, SignatureVerifier
from walletcore.sandbox.jsonstore import JsonFile, JsonStoreError, decode, encode

FORMAT = "walletcore-sandbox-chain"
VERSION = 1
DATA_FILE = "sandbox-chain.json"


class LedgerError(JsonStoreError):
    """The ledger file cannot be used (corrupt, foreign, or of a newer format)."""


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


@dataclass(frozen=True, slots=True)
class LedgerState:
    txs: tuple[LedgerTx, ...] = ()
    by_hash: Mapping[str, LedgerTx] = field(default_factory=dict)

    @classmethod
    def of(cls, txs: tuple[LedgerTx, ...]) -> LedgerState:
        return cls(txs, {t.tx_hash: t for t in txs})

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "txs": [encode(t) for t in self.txs]}

    @classmethod
    def from_json(cls, data: Any, path: Path) -> LedgerState:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LedgerError(f"{path} is not a walletcore sandbox chain file")
        if data.get("version") != VERSION:
            raise LedgerError(f"{path} has format version {data.get('version')!r}")
        return cls.of(tuple(decode(LedgerTx, t) for t in data.get("txs", [])))

    # -- reading ----------------------------------------------------------------------
    def balance(self, chain: Chain, address: str, asset_id: int, now: datetime) -> int:
        """What `address` can spend: confirmed credits, minus every debit and fee paid."""
        native_id = native_asset(chain).id
        total = 0
        for tx in self.txs:
            if tx.chain is not chain:
                continue
            if tx.asset_id == asset_id:
                if tx.recipient == address and tx.confirmed(now):
                    total += tx.amount_units
                if tx.sender == address:
                    total -= tx.amount_units
            if asset_id == native_id and tx.fee_payer == address:
                total -= tx.fee_units
        return total

    def knows(self, chain: Chain, address: str) -> bool:
        """Whether `address` took part in any transaction on `chain` (an indexer knows it)."""
        return any(
            t.chain is chain and address in (t.sender, t.recipient, t.fee_payer) for t in self.txs
        )

    def has_received(self, chain: Chain, address: str, asset_id: int) -> bool:
        """Whether `address` ever received `asset_id` (it has a token account / holds it)."""
        return any(
            t.chain is chain and t.asset_id == asset_id and t.recipient == address for t in self.txs
        )

    def rows(self, chain: Chain, address: str, asset_id: int, now: datetime) -> list[TxRow]:
        """This wallet's transactions of the asset, newest first."""
        mine = [
            t
            for t in self.txs
            if t.chain is chain and t.asset_id == asset_id and address in (t.sender, t.recipient)
        ]
        return [row_of(t, address, now) for t in reversed(mine)]


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
    """The shared ledger: reads from the cached file, changes under its lock."""

    def __init__(
        self,
        path: Path,
        clock: Clock,
        verify: SignatureVerifier,
        confirm_seconds: float = 3.0,
    ) -> None:
        self._file: JsonFile[LedgerState] = JsonFile(
            path,
            load=LedgerState.from_json,
            dump=LedgerState.to_json,
            empty=LedgerState,
            error=LedgerError,
        )
        self._clock = clock
        self._verify = verify
        self._confirm = timedelta(seconds=confirm_seconds)

    def __repr__(self) -> str:
        return f"SandboxLedger({str(self._file.path)!r})"

    @property
    def state(self) -> LedgerState:
        return self._file.read()

    def now(self) -> datetime:
        return self._clock.now()

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

        def change(state: LedgerState) -> tuple[LedgerState | None, bool]:
            if tx.tx_hash in state.by_hash:
                return None, False
            now = self._clock.now()
            for (address, asset_id), units in needs.items():
                if state.balance(tx.chain, address, asset_id, now) < units:
                    raise InsufficientFunds(
                        "Insufficient balance at broadcast: the network refused the "
                        "transfer; nothing was sent"
                    )
            stamped = replace(tx, accepted_at=now, confirm_at=now + self._confirm)
            return LedgerState.of((*state.txs, stamped)), True

        return await self._file.mutate(change)

    async def credit(
        self, chain: Chain, address: str, asset_id: int, units: int, tx_hash: str
    ) -> int:
        """A faucet credit, confirmed at once; the address's new balance of the asset."""
        now = self._clock.now()
        tx = LedgerTx(tx_hash, chain, asset_id, None, address, units, 0, None, now, now)

        def change(state: LedgerState) -> tuple[LedgerState, int]:
            new = LedgerState.of((*state.txs, tx))
            return new, new.balance(chain, address, asset_id, now)

        return await self._file.mutate(change)


__all__ = ["DATA_FILE", "LedgerError", "LedgerState", "LedgerTx", "SandboxLedger", "row_of"]
