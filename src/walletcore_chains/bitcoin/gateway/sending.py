"""Broadcasting of `BitcoinGateway`: the backend's broadcast, the node's refusal
read (`errors.REFUSALS`), the txid the node reports checked against the stored one, the
spent coins kept out of selections until the backend shows the transaction.
"""

from __future__ import annotations

import asyncio
import logging
import time

from walletcore.domain.errors import (
    BroadcastTimeout,
    DomainError,
    ServerError,
    ServiceUnavailable,
    TransferRejected,
)
from walletcore.ports import SignedTransfer
from walletcore_chains.bitcoin import errors
from walletcore_chains.bitcoin.backend import BackendFailure, BroadcastRefused
from walletcore_chains.bitcoin.gateway.base import RESERVE_SECONDS
from walletcore_chains.bitcoin.gateway.building import Building

log = logging.getLogger("walletcore_chains.bitcoin.gateway")


class Sending(Building):
    """Broadcast."""

    def _parsed(self, raw: bytes) -> tuple[str, list[tuple[str, int]]]:
        """A signed transaction's txid and the coins it spends, from one parse."""
        from walletcore_chains import bclib

        tx = bclib.transactions().Transaction.parse_bytes(raw, network=self.network.bitcoinlib)
        return str(tx.txid), [(bytes(i.prev_txid).hex(), int(i.output_n_int)) for i in tx.inputs]

    async def broadcast(self, signed: SignedTransfer) -> str:
        turns = self._held.pop(signed.tx_hash, {})
        try:
            txid, spent = self._parsed(signed.raw)
        except Exception:  # noqa: BLE001 - not our bytes
            await self._give_back(turns)
            raise TransferRejected("Transfer rejected: malformed transaction") from None
        if txid != signed.tx_hash:
            await self._give_back(turns)
            raise ServerError(
                "The stored transaction does not match its hash; contact the operator"
            )
        until = time.monotonic() + RESERVE_SECONDS
        for outpoint in spent:
            self._reserved[outpoint] = until
        try:
            reported = await self._send(signed.raw, txid)
        except BaseException as exc:
            refused = isinstance(exc, DomainError) and (
                exc.status < 500 or isinstance(exc, TransferRejected | ServiceUnavailable)
            )
            if refused:  # nothing was sent: its coins are free again
                for outpoint in spent:
                    self._reserved.pop(outpoint, None)
            await self._give_back(turns)
            raise
        if reported != txid:
            log.error("the node reported txid %s for the transaction stored as %s", reported, txid)
            await self._give_back(turns)
            raise ServerError("The network reported another transaction hash; contact the operator")
        await self._seen(txid)
        await self._give_back(turns, sent=True)
        return txid

    async def _send(self, raw: bytes, txid: str) -> str:
        try:
            return await self.backend.broadcast(raw.hex())
        except BroadcastRefused as exc:
            meaning = errors.refusal(exc.reason)
        except BackendFailure as exc:
            # never left: nothing was sent; a timeout, or an error answer we cannot read:
            # the outcome is unknown
            raise errors.TRANSPORT.send_error(exc) from None
        if isinstance(meaning, errors.AlreadyKnown):
            return txid
        if isinstance(meaning, errors.Spent):
            try:
                known = await self.backend.transaction(txid)
            except BackendFailure:
                raise BroadcastTimeout() from None  # cannot tell whether it was ours
            if known is not None and not known.conflicted:
                return txid  # our transaction spent them: sent before
            raise errors.double_spend() from None
        assert isinstance(meaning, DomainError)
        raise meaning from None

    async def _seen(self, txid: str) -> None:
        """Wait (bounded) until the backend shows `txid`, so the next send from the address
        selects after it (its change in, its coins out)."""
        deadline = time.monotonic() + self.options.index_wait
        while True:
            try:
                if await self.backend.transaction(txid) is not None:
                    return
            except BackendFailure:
                pass
            if time.monotonic() >= deadline:
                log.warning(
                    "the Bitcoin backend does not show %s yet; its coins stay reserved", txid
                )
                return
            await asyncio.sleep(0.1)


__all__ = ["Sending"]
