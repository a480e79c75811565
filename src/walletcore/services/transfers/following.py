"""Following a transfer to its end (docs/transfers.md): the `follow_sends` job asks the chain
about each send not final yet and moves it.

- every transaction of the transfer is asked of the chain (`sighting`), the current one
  first; the first found final settles the transfer (`success`; `failed` when it reverted
  or when it is a cancel), and becomes its current transaction;
- the current one pending longer than the chain's `stuck_after_seconds`: `stuck`, and with
  automatic bumping (`WALLETCORE_FEE_BUMP=auto`) the next `bump` rung takes its place;
- missing from the node (evicted, dropped): `dropped`, and the same bytes are broadcast
  again (`replacing`);
- taken over by a transaction this service did not send: `failed`;
- expired (SOLANA, TRON): re-signed by the job for a platform send, `dropped` until the
  client's `/send` replay for a user's send.

A gateway that is no `TransferFollower` (the sandbox) is followed by its lookup's status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import DomainError, TransactionNotFound
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.ports import ChainGateway
from walletcore.ports.follow import Sighting, TransferFollower
from walletcore.services.send_record import Attempt, SignedSend
from walletcore.services.transfers.moves import Followed, Moves
from walletcore.services.transfers.replacing import Replacing
from walletcore.services.transfers.signing import TransferSettings, follower

log = logging.getLogger("walletcore.transfers")


class Following:
    """One run of the follow job on one send (the module's docstring)."""

    def __init__(
        self,
        moves: Moves,
        replacing: Replacing,
        gateways: Mapping[Chain, ChainGateway],
        settings: TransferSettings,
        catalog: Catalog,
    ) -> None:
        self._moves = moves
        self._catalog = catalog
        self._replacing = replacing
        self._clock = moves.clock
        self._gateways = gateways
        self._settings = settings

    async def follow(self, record: SendRecord, request_id: str) -> Followed:
        """Ask the chain about one send not final yet, and move it (module docstring)."""
        key = f"{record.client_id}/{record.request_id}"
        try:
            signed = SignedSend.from_bytes(record.raw_tx)
        except (DomainError, ValueError, KeyError, TypeError):
            log.warning("send %s: its stored transaction cannot be read; not followed", key)
            return Followed.SKIPPED
        gateway = self._gateways.get(signed.chain)
        if signed.sender is None or gateway is None:
            log.debug("send %s (%s) cannot be followed here", key, signed.chain.value)
            return Followed.SKIPPED
        chain_follower = follower(gateway)
        asset = self._catalog.asset_by_id(signed.asset_id)
        if chain_follower is None:
            return await self._follow_by_lookup(record, signed, gateway, asset, request_id)
        seen = await self._moves.sightings(chain_follower, signed, asset, stop_at_pending=True)
        for attempt, sighting in seen:
            if sighting.is_final:
                return await self._moves.settle(record, signed, attempt, sighting, request_id)
        return await self._keep_going(record, signed, gateway, chain_follower, seen, request_id)

    async def _keep_going(
        self,
        record: SendRecord,
        signed: SignedSend,
        gateway: ChainGateway,
        chain_follower: TransferFollower,
        seen: list[tuple[Attempt, Sighting]],
        request_id: str,
    ) -> Followed:
        now = self._clock.now()
        current = seen[0][1]
        others = {s for _, s in seen[1:]}
        if current is Sighting.MISSING:
            return await self._replacing.refill(record, signed, gateway, request_id)
        if current is Sighting.PENDING:
            since = signed.at or record.chain_checked_at or record.updated_at
            if now - since >= timedelta(seconds=chain_follower.stuck_after_seconds):
                rung = signed.next_rung("bump") if self._settings.automatic else None
                if rung is not None:
                    return await self._replacing.replace(
                        record, signed, rung, ChainStatus.STUCK, request_id
                    )
                return await self._moves.mark(record, signed, ChainStatus.STUCK, request_id)
            return await self._moves.mark(record, signed, ChainStatus.PENDING, request_id)
        if Sighting.PENDING in others or Sighting.MISSING in others:
            # the current one can never land, an earlier one still may (mined, not deep yet)
            return await self._moves.mark(record, signed, ChainStatus.PENDING, request_id)
        if current is Sighting.EXPIRED and chain_follower.resigns:
            if self._settings.automatic and signed.user_id is None:
                outcome, _ = await self._replacing.resign_expired(
                    record, signed, gateway, seen, None, request_id
                )
                return outcome
            return await self._moves.mark(record, signed, ChainStatus.DROPPED, request_id)
        # every transaction of the transfer can never land and none was mined: another
        # transaction took their place (or, on a chain that never re-signs, they expired)
        return await self._moves.settle(record, signed, signed.current, current, request_id)

    async def _follow_by_lookup(
        self,
        record: SendRecord,
        signed: SignedSend,
        gateway: ChainGateway,
        asset: Asset,
        request_id: str,
    ) -> Followed:
        """A gateway without the lifecycle (the sandbox): its lookup's status only."""
        assert signed.sender is not None
        try:
            row = await gateway.lookup(signed.sender, asset, signed.tx_hash)
        except TransactionNotFound:
            return Followed.PENDING
        except Exception as exc:  # noqa: BLE001 - a node error: asked again next run
            log.warning(
                "send %s/%s: the %s node failed (%s); asked again later",
                record.client_id,
                record.request_id,
                signed.chain.value,
                type(exc).__name__,
            )
            return Followed.PENDING
        try:
            status = ChainStatus(row.status)
        except ValueError:
            log.warning(
                "send %s/%s: unknown chain status %r",
                record.client_id,
                record.request_id,
                row.status,
            )
            return Followed.PENDING
        if not status.is_final:
            return Followed.PENDING
        sighting = Sighting.SUCCESS if status is ChainStatus.SUCCESS else Sighting.FAILED
        return await self._moves.settle(record, signed, signed.current, sighting, request_id)


__all__ = ["Following"]
