"""The operator's commands on a send (`walletcore sends show|bump|cancel`,
docs/transfers.md): its view (`describe`: never its bytes or a key), and a bump or a cancel
asked by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import InvalidRequest, NotFound
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.ports import ChainGateway
from walletcore.ports.follow import Sighting, TransferFollower
from walletcore.services.send_record import Attempt, SignedSend
from walletcore.services.transfers.moves import Followed, Moves
from walletcore.services.transfers.replacing import Replacing
from walletcore.services.transfers.signing import follower


class Operator:
    """The operator's view of a send, and the replacements the operator asks for."""

    def __init__(
        self,
        moves: Moves,
        replacing: Replacing,
        gateways: Mapping[Chain, ChainGateway],
        catalog: Catalog,
    ) -> None:
        self._moves = moves
        self._catalog = catalog
        self._replacing = replacing
        self._storage = moves.storage
        self._gateways = gateways

    async def show(self, client_id: str, request_id: str) -> dict[str, Any]:
        record = await self._get(client_id, request_id)
        return describe(record)

    async def replace(
        self, client_id: str, request_id: str, *, cancel: bool, request_id_audit: str
    ) -> dict[str, Any]:
        """The operator's bump (the next `bump` rung) or cancel (the cheapest `cancel` rung)
        of a send not final yet; on a chain that re-signs, a cancel settles an expired
        transfer as `failed` (it can never land) and a bump re-signs an expired platform
        send. Refused (400) with what to do instead otherwise."""
        record = await self._get(client_id, request_id)
        if not record.is_followed:
            raise InvalidRequest(
                f"send {request_id} is not followed or already final "
                f"({record.chain_status or 'not followed'}): nothing to replace"
            )
        signed = SignedSend.from_bytes(record.raw_tx)
        gateway = self._gateways.get(signed.chain)
        chain_follower = follower(gateway)
        if gateway is None or chain_follower is None:
            raise InvalidRequest(f"{signed.chain.value} here cannot replace transfers")
        if chain_follower.resigns:
            await self._replace_by_resigning(
                record, signed, chain_follower, cancel=cancel, request_id=request_id_audit
            )
        else:
            rung = signed.next_rung("cancel" if cancel else "bump")
            if rung is None:
                raise InvalidRequest(
                    f"send {request_id} has no {'cancel' if cancel else 'bump'} left under "
                    f"its fee cap (`WALLETCORE_FEE_CAPS`, when it was signed)"
                )
            outcome = await self._replacing.replace(
                record,
                signed,
                rung,
                record.chain_status or ChainStatus.PENDING,
                request_id_audit,
                detail=" (operator)",
            )
            if outcome is Followed.LOST:
                raise InvalidRequest("the send moved meanwhile; show it and try again")
        return describe(await self._moves.reload(record))

    async def _replace_by_resigning(
        self,
        record: SendRecord,
        signed: SignedSend,
        chain_follower: TransferFollower,
        *,
        cancel: bool,
        request_id: str,
    ) -> None:
        asset = self._catalog.asset_by_id(signed.asset_id)
        seen = await self._moves.sightings(chain_follower, signed, asset, stop_at_pending=False)
        expired = all(s is Sighting.EXPIRED for _, s in seen)
        if not expired:
            raise InvalidRequest(
                f"{signed.chain.value} has no fee replacement: a transfer is re-signed or "
                "cancelled only once it can provably never land (its blockhash or expiration "
                "lapsed); the follow job re-broadcasts it until then"
            )
        if cancel:
            await self._moves.settle(record, signed, signed.current, Sighting.EXPIRED, request_id)
            return
        if signed.user_id is not None:
            raise InvalidRequest(
                "a user's transfer is re-signed with the user's password: the client "
                "replays its /send with the same X-Request-Id"
            )
        await self._replacing.resign_expired(
            record, signed, self._gateways[signed.chain], seen, None, request_id
        )

    async def _get(self, client_id: str, request_id: str) -> SendRecord:
        async with self._storage.read() as unit:
            record = await unit.sends.get(client_id, request_id)
        if record is None or record.raw_tx is None:
            raise NotFound(f"no signed send {request_id} of client {client_id}")
        return record


def describe(record: SendRecord) -> dict[str, Any]:
    """The operator's view of a send (never its bytes or a key)."""
    signed = SignedSend.from_bytes(record.raw_tx)

    def one(attempt: Attempt) -> dict[str, Any]:
        return {
            "kind": attempt.kind,
            "txHash": attempt.tx_hash,
            "feeUnits": attempt.fee_units,
            "at": None if attempt.at is None else attempt.at.isoformat(),
        }

    return {
        "clientId": record.client_id,
        "requestId": record.request_id,
        "chain": signed.chain.value,
        "assetId": signed.asset_id,
        "userId": signed.user_id,
        "sender": signed.sender,
        "recipient": signed.recipient,
        "amountUnits": signed.amount_units,
        "state": record.state.value,
        "chainStatus": None if record.chain_status is None else record.chain_status.value,
        "status": None if record.chain_status is None else record.chain_status.public,
        "checkedAt": None
        if record.chain_checked_at is None
        else record.chain_checked_at.isoformat(),
        "finalAt": None if record.chain_final_at is None else record.chain_final_at.isoformat(),
        "current": one(signed.current),
        "earlier": [one(a) for a in signed.earlier],
        "ladder": [{"kind": r.kind, "feeUnits": r.fee_units} for r in signed.ladder],
    }


__all__ = ["Operator", "describe"]
