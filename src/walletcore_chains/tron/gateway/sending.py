"""Broadcasting of `TronGateway`: the signed bytes sent as they are
(`wallet/broadcasthex`), a top-up waited for in a block, the node's refusal read
(`errors.refusals`): `DUP_TRANSACTION_ERROR` counts as sent, an expired transaction is sent
only if the node knows it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from walletcore.domain.errors import BroadcastTimeout, TransferRejected
from walletcore.ports import SignedTransfer
from walletcore_chains.tron import errors, proto
from walletcore_chains.tron.gateway.building import Building

log = logging.getLogger("walletcore_chains.tron.gateway")

_POLL = 0.5


class Sending(Building):
    """Broadcast."""

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            txs = [bytes.fromhex(t) for t in json.loads(signed.raw)["txs"]]
            raws = [proto.split_signed(t)[0] for t in txs]
            kinds = [proto.Raw.decode(r).contract.kind for r in raws]
        except (ValueError, KeyError, TypeError):
            raise TransferRejected(
                "Transfer rejected by the network: malformed transaction"
            ) from None
        for index, tx in enumerate(txs):
            tx_id = proto.txid(raws[index])
            await self._send(tx, tx_id, token=kinds[index] == proto.TRIGGER)
            if index < len(txs) - 1:
                await self._in_block(tx_id)
        return proto.txid(raws[-1])

    async def _send(self, tx: bytes, tx_id: str, *, token: bool) -> None:
        try:
            answer = await self.client.broadcast_hex(tx)
        except Exception as exc:  # noqa: BLE001 - any transport failure
            if errors.is_unreachable(exc):
                raise errors.unreachable_send() from None
            log.warning("broadcast of %s: outcome unknown (%s)", tx_id, type(exc).__name__)
            raise BroadcastTimeout() from None
        if answer.get("result") is True:
            return
        meaning = errors.broadcast_refusal(answer, token=token)
        if isinstance(meaning, errors.AlreadyKnown):
            return
        if isinstance(meaning, errors.Expired):
            if await self._known(tx_id):
                return
            raise errors.expired()
        raise meaning

    async def _known(self, tx_id: str) -> bool:
        """Whether the node knows the transaction; when it cannot tell, the outcome of the
        broadcast is unknown (never "refused" for a transaction that may have landed)."""
        try:
            return await self.client.transaction(tx_id) is not None
        except Exception:  # noqa: BLE001 - cannot tell
            raise BroadcastTimeout() from None

    async def _in_block(self, tx_id: str) -> None:
        """Wait until the top-up `tx_id` is in a block (the transfer needs its TRX)."""
        deadline = time.monotonic() + self.options.receipt_timeout
        while True:
            try:
                if await self.client.info(tx_id, solid=False) is not None:
                    return
            except Exception as exc:  # noqa: BLE001 - a read failing while waiting: try again
                log.debug("top-up %s not readable yet: %s", tx_id, type(exc).__name__)
            if time.monotonic() >= deadline:
                log.warning("top-up %s not in a block in time; its transfer waits", tx_id)
                raise BroadcastTimeout()
            await asyncio.sleep(_POLL)


__all__ = ["Sending"]
