"""The follow-up of a sent transfer (`TransferFollower`): `sighting` of its
transaction; no replacements (TRON re-signs an EXPIRED transfer instead).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from walletcore.domain.assets import Asset
from walletcore.ports import Replacement, Sighting, SignedTransfer, UnsignedTransfer
from walletcore_chains.tron import errors, proto, rows
from walletcore_chains.tron.gateway.sending import Sending


class Following(Sending):
    """The transfer lifecycle."""

    # -- the transfer lifecycle (`TransferFollower`) ----------------------------------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """What the chain says of `signed`'s transaction (the transfer itself; a PLATFORM
        top-up before it is re-sent with it, never followed on its own):

        - in a solidified block: SUCCESS, or FAILED (`OUT_OF_ENERGY`, `REVERT`, ...: its fee
          was burned), the rule `lookup` uses;
        - in a block not yet solidified, or in the node's pending pool: PENDING;
        - else EXPIRED once the solidified head is past the transaction's `expiration` by
          `expiry_margin_seconds` (java-tron takes a transaction only into a block whose
          parent is older than its expiration, so no block after that head can carry it, and
          every block up to it is irreversible and was read): re-signing is safe;
        - else MISSING: the same bytes are still valid, and may be sent again.

        The solidified head is read first, so a block arriving while the transaction is
        looked up cannot be missed. A node error raises (`NodeUnavailable`), never MISSING."""
        tx_id, expiration = _followed(signed)
        try:
            solid_head = await self.client.head(solid=True)
            solid = await self.client.info(tx_id, solid=True)
            if solid is not None:
                return Sighting.FAILED if rows.receipt_failed(solid) else Sighting.SUCCESS
            if await self.client.info(tx_id, solid=False) is not None:
                return Sighting.PENDING
            if await self.client.transaction(tx_id) is not None:
                return Sighting.PENDING
            if await self.client.pending(tx_id):
                return Sighting.PENDING
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        margin = math.ceil(self.options.expiry_margin_seconds * 1000)
        if solid_head.timestamp > expiration + margin:
            return Sighting.EXPIRED
        return Sighting.MISSING

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        """Empty: TRON has no fee replacement (a transaction's fee is what it burns); a
        transfer that cannot land any more is re-signed instead (`resigns`)."""
        return []


def _followed(signed: SignedTransfer) -> tuple[str, int]:
    """(txID, expiration in ms) of the transfer's own transaction in `signed` (the last of
    its `txs`: a PLATFORM top-up comes first)."""
    try:
        last = bytes.fromhex(json.loads(signed.raw)["txs"][-1])
        raw_bytes = proto.split_signed(last)[0]
        expiration = proto.Raw.decode(raw_bytes).expiration
    except (ValueError, KeyError, TypeError, IndexError):
        raise ValueError("not a signed TRON transfer of this gateway") from None
    tx_id = proto.txid(raw_bytes)
    if tx_id != signed.tx_hash.strip().lower().removeprefix("0x"):
        raise ValueError("the signed transfer's hash is not its transaction's txID")
    return tx_id, expiration


__all__ = ["Following"]
