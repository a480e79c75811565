"""The coins a send may spend, and the reads (balance, history, lookup) of
`BitcoinGateway`: what the backend shows of an address, net of this process's reservations.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from walletcore.domain.assets import Asset
from walletcore.domain.errors import AddressUnknown, TransactionNotFound
from walletcore.domain.wallet import TxRow
from walletcore_chains.bitcoin import errors
from walletcore_chains.bitcoin.backend import BackendFailure, TxView, Utxo
from walletcore_chains.bitcoin.gateway.base import COINBASE_MATURITY, GatewayBase


class Reads(GatewayBase):
    """Coins and reads."""

    # -- coins --------------------------------------------------------------------------
    def _unreserve_spent(self, listed: list[Utxo]) -> None:
        now = time.monotonic()
        present = {(u.txid, u.vout) for u in listed}
        for outpoint, until in list(self._reserved.items()):
            if until < now or outpoint not in present:  # expired, or the backend saw it spent
                self._reserved.pop(outpoint, None)

    async def spendable(self, address: str) -> list[Utxo]:
        """Coins a send may use: confirmed and mature, or unconfirmed change of the
        wallet's own transactions; none that a recent broadcast of this process spent."""
        try:
            listed = await self.backend.utxos(address)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        self._unreserve_spent(listed)
        candidates = [u for u in listed if (u.txid, u.vout) not in self._reserved]
        young = [
            u for u in candidates if u.height is None or tip - u.height + 1 < COINBASE_MATURITY
        ]
        views: dict[str, TxView | None] = {}
        if young:
            txids = list(dict.fromkeys(u.txid for u in young))
            try:
                found = await asyncio.gather(*(self.backend.transaction(t) for t in txids))
            except BackendFailure as exc:
                raise errors.read_error(exc) from None
            views = dict(zip(txids, found, strict=True))
        out = []
        for coin in candidates:
            view = views.get(coin.txid)
            if coin.height is None:
                if view is None or not any(i.address == address for i in view.inputs):
                    continue  # received, unconfirmed: spendable once mined
            elif view is not None and view.coinbase:
                continue  # immature coinbase
            out.append(coin)
        return out

    # -- reads --------------------------------------------------------------------------
    async def balance(self, address: str, asset: Asset) -> int:
        self._native(asset)
        coins = await self.spendable(address)
        if not coins:
            try:
                known = await self.backend.address_known(address)
            except BackendFailure as exc:
                raise errors.read_error(exc) from None
            if not known:
                raise AddressUnknown()
        return sum(c.value for c in coins)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        self._native(asset)
        try:
            views = await self.backend.history(address, limit)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc, history=True) from None
        rows = [self._row(v, address, tip) for v in views]
        return [r for r in rows if r is not None][:limit]

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        self._native(asset)
        wanted = tx_hash.strip().lower()
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise TransactionNotFound()
        try:
            view = await self.backend.transaction(wanted)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        row = None if view is None else self._row(view, address, tip)
        if row is None:
            raise TransactionNotFound()
        return row

    def _row(self, view: TxView, address: str, tip: int) -> TxRow | None:
        paid = sum(i.value for i in view.inputs if i.address == address)
        received = sum(o.value for o in view.outputs if o.address == address)
        if paid:
            fee_payer = view.inputs[-1].address if view.inputs else None
            moved = paid - received - (view.fee if fee_payer == address else 0)
            kind, amount = "send", max(0, moved)
        elif received:
            kind, amount = "receive", received
        else:
            return None
        if view.conflicted:
            status = "failed"
        elif view.height is None:
            status = "pending"
        elif tip - view.height + 1 >= self.options.confirmations:
            status = "success"
        else:
            status = "pending"
        date = None
        if status == "success" and view.block_time is not None:
            date = datetime.fromtimestamp(view.block_time, UTC)
        return TxRow(view.txid, kind, amount, view.fee, status, date)


__all__ = ["Reads"]
