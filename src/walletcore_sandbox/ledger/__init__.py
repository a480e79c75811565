"""The sandbox chains' ledger: every sandbox transaction of every chain, in one SQLite file.

It stands in for the networks on the sandbox profile: `SandboxLedger`, a ledger open in one
process, on `WALLETCORE_HOME/sandbox-chain.db`, which the server's workers and the operator
CLI (`walletcore sandbox fund`) share. One module per reason to change, each with its rules:
- `store`: the file's layout and statements, a transaction as a row (`LedgerTx`);
- `connections`: the writer on a worker thread, a read-only reader per thread, WAL;
- `balances`: a balance summed from an address's shares of the transactions, and the shares
  a reader keeps while the ledger is unchanged;
- `rules`: which transfers are accepted (signatures, known hashes, funds), when they
  confirm, faucet credits, a transaction in a wallet's history.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.times import utc
from walletcore.domain.wallet import TxRow
from walletcore.ports import Clock, SignatureVerifier
from walletcore_sandbox.ledger import balances, rules, store
from walletcore_sandbox.ledger.balances import SHARES_SEEN
from walletcore_sandbox.ledger.connections import LATER, Connections
from walletcore_sandbox.ledger.rules import row_of
from walletcore_sandbox.ledger.store import DATA_FILE, LedgerError, LedgerTx


class SandboxLedger:
    """The shared ledger: its connections opened on first use (`connections`). `catalog`:
    the served assets, whose chains' coins pay the fees."""

    def __init__(
        self,
        path: Path,
        clock: Clock,
        verify: SignatureVerifier,
        confirm_seconds: float = 3.0,
        *,
        catalog: Catalog,
    ) -> None:
        self.path = Path(path)
        #: chain -> the id of its coin
        self._natives = {c: catalog.native_asset(c).id for c in catalog.chains}
        self._clock = clock
        self._verify = verify
        self._confirm = timedelta(seconds=confirm_seconds)
        self._connections = Connections(self.path)

    def __repr__(self) -> str:
        return f"SandboxLedger({str(self.path)!r})"

    def now(self) -> datetime:
        return utc(self._clock.now())

    # -- reading ----------------------------------------------------------------------
    async def balance(self, chain: Chain, address: str, asset_id: int) -> int:
        """What `address` can spend: confirmed credits, minus every debit and fee paid."""
        now = self.now()
        seen = self._connections.seen
        holding = self._holding(chain, address, asset_id)
        return await self._connections.read(
            lambda conn: balances.balance(conn, seen.get(conn), holding, now)
        )

    async def known_balance(self, chain: Chain, address: str, asset_id: int) -> int | None:
        """`balance`, or None when `address` took part in no transaction on `chain` (what
        `knows` answers), in one read: on this thread's reader with no await when it can
        (every sell and its approval reads one), else as `Connections.read` does."""
        now = self.now()
        connections = self._connections
        seen = connections.seen
        holding = self._holding(chain, address, asset_id)

        def work(conn: sqlite3.Connection) -> int | None:
            return balances.known_balance(conn, seen.get(conn), holding, now)

        found = connections.read_now(work)
        return await connections.read(work) if found is LATER else found  # type: ignore[return-value]

    async def knows(self, chain: Chain, address: str) -> bool:
        """Whether `address` took part in any transaction on `chain` (an indexer knows it)."""
        return await self._exists(store.KNOWS, (chain.value, address))

    async def has_received(self, chain: Chain, address: str, asset_id: int) -> bool:
        """Whether `address` ever received `asset_id` (it has a token account / holds it)."""
        return await self._exists(store.RECEIVED, (chain.value, address, asset_id))

    async def history(self, chain: Chain, address: str, asset_id: int, limit: int) -> list[TxRow]:
        """This wallet's transactions of the asset, newest first, at most `limit`."""
        now = self.now()
        parameters = (chain.value, address, asset_id, max(0, limit))
        found = await self._connections.read(lambda c: store.select(c, store.HISTORY, parameters))
        return [row_of(tx, address, now) for tx in found]

    async def find(self, tx_hash: str) -> LedgerTx | None:
        found = await self._connections.read(lambda c: store.select(c, store.FIND, (tx_hash,)))
        return found[0] if found else None

    # -- as blocks (the deposit scan) ---------------------------------------------------
    async def head(self) -> tuple[int, str]:
        """The newest entry's height and hash; (0, "") on an empty ledger."""
        found = await self._connections.read(lambda c: c.execute(store.HEAD).fetchone())
        return (0, "") if found is None else (int(found[0]), str(found[1]))

    async def entry_at(self, height: int) -> tuple[int, str] | None:
        """The entry at `height` (its hash); (0, "") is the empty ledger's genesis."""
        if height == 0:
            return (0, "")
        found = await self._connections.read(lambda c: c.execute(store.AT, (height,)).fetchone())
        return None if found is None else (int(found[0]), str(found[1]))

    async def entries(self, chain: Chain, first: int, last: int) -> list[tuple[int, LedgerTx]]:
        """`chain`'s transactions at heights `first..last`, with their heights."""

        def work(conn: sqlite3.Connection) -> list[tuple[int, LedgerTx]]:
            rows = conn.execute(store.RANGE, (first, last, chain.value)).fetchall()
            return [(int(row[0]), LedgerTx.of(tuple(row[1:]))) for row in rows]

        return await self._connections.read(work)

    async def height_of(self, tx_hash: str) -> int | None:
        found = await self._connections.read(
            lambda c: c.execute(store.SEQ_OF, (tx_hash,)).fetchone()
        )
        return None if found is None else int(found[0])

    async def transactions(self) -> list[LedgerTx]:
        """Every transaction, in the order they were accepted."""
        return await self._connections.read(lambda c: store.select(c, store.EVERY, ()))

    # -- changing ---------------------------------------------------------------------
    async def accept(self, tx: LedgerTx, payload: bytes, signatures: Mapping[str, bytes]) -> bool:
        """Put a signed transfer on the ledger; False when its hash was there already.

        Raises `TransferRejected` (a missing or wrong signature) or `InsufficientFunds`:
        nothing is stored then (`rules`).
        """
        rules.check_signatures(tx, payload, signatures, self._verify)
        native_id = self._natives[tx.chain]
        taken = rules.needs(tx, native_id)
        return await self._connections.run(
            lambda conn: rules.accept(conn, tx, taken, native_id, self.now, self._confirm)
        )

    async def credit(
        self, chain: Chain, address: str, asset_id: int, units: int, tx_hash: str
    ) -> int:
        """A faucet credit, confirmed at once; the address's new balance of the asset."""
        holding = self._holding(chain, address, asset_id)
        return await self._connections.run(
            lambda conn: rules.credit(conn, holding, units, tx_hash, self.now)
        )

    def _holding(self, chain: Chain, address: str, asset_id: int) -> balances.Holding:
        return (chain, address, asset_id, asset_id == self._natives[chain])

    async def aclose(self) -> None:
        """Close the connections; the next call opens them again."""
        await asyncio.to_thread(self._connections.close)

    async def _exists(self, sql: str, parameters: tuple[object, ...]) -> bool:
        return await self._connections.read(
            lambda conn: conn.execute(sql, parameters).fetchone() is not None
        )


__all__ = [
    "DATA_FILE",
    "SHARES_SEEN",
    "LedgerError",
    "LedgerTx",
    "SandboxLedger",
    "row_of",
]
