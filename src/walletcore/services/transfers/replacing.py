"""Replacing a transfer's transaction (docs/transfers.md): a bump or a cancel from the
ladder signed with the send, the same bytes broadcast again when the node lost them (a
refusal re-fills the place with the next rung), and the re-signing of an expired transfer
(SOLANA, TRON) with a fresh fee quote under the cap.

A replacement is stored (compare and set on the transfer's current hash, with its audit
entry) before it is broadcast: two runs racing store one, and a re-signed transfer is never
signed twice. Broadcasting a stored rung again is harmless (the same bytes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InvalidRequest,
    TransferRejected,
)
from walletcore.domain.events import EventType
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.ports import ChainGateway, KeyStore, Transfer
from walletcore.ports.follow import Sighting
from walletcore.services.event_notes import send_note
from walletcore.services.send_record import Attempt, SignedSend
from walletcore.services.transfers.moves import (
    SEND_REBROADCAST,
    SEND_REPLACE,
    SEND_RESIGN,
    Followed,
    Moves,
)
from walletcore.services.transfers.signing import (
    FeeCaps,
    TransferSettings,
    Wallets,
    follower,
    sign_transfer,
)
from walletcore.services.wallet_access import platform_wallet, user_wallet

log = logging.getLogger("walletcore.transfers")


class Replacing:
    """Bumps, cancels, re-broadcasts and re-signs of the transfers (the module's docstring)."""

    def __init__(
        self,
        moves: Moves,
        keystore: KeyStore,
        gateways: Mapping[Chain, ChainGateway],
        settings: TransferSettings,
        caps: FeeCaps,
        catalog: Catalog,
    ) -> None:
        self._moves = moves
        self._catalog = catalog
        self._storage = moves.storage
        self._clock = moves.clock
        self._keystore = keystore
        self._gateways = gateways
        self._settings = settings
        self._caps = caps

    async def replace(
        self,
        record: SendRecord,
        signed: SignedSend,
        attempt: Attempt,
        status: ChainStatus,
        request_id: str,
        *,
        detail: str = "",
    ) -> Followed:
        """Store `attempt` as the transfer's transaction, then broadcast it."""
        now = self._clock.now()
        moved = signed.moved_to(attempt, now)
        new = record.tracked(status, now, raw_tx=moved.to_bytes(), tx_hash=attempt.tx_hash)
        text = f"{attempt.kind} {signed.tx_hash} -> {attempt.tx_hash}, fee {attempt.fee_units}"
        entry = self._moves.entry(
            record,
            signed,
            SEND_REPLACE,
            request_id,
            target=attempt.tx_hash,
            detail=f"{text}{detail}",
            event=send_note(
                EventType.SEND_REPLACED,
                moved,
                record.request_id,
                self._moves.catalog,
                replaced=signed.tx_hash,
            ),
        )
        outcome = await self._moves.move(record, new, entry)
        if outcome is not Followed.MOVED:
            return outcome
        log.info("send %s/%s: %s", record.client_id, record.request_id, text)
        await self._broadcast_quietly(self._gateways[signed.chain], record, attempt)
        return outcome

    async def refill(
        self, record: SendRecord, signed: SignedSend, gateway: ChainGateway, request_id: str
    ) -> Followed:
        """The node lost the current transaction: broadcast it again; refused now, the next
        rung (a bump, else the cancel) takes its place."""
        try:
            await gateway.broadcast(signed.current.signed())
        except (TransferRejected, InsufficientFunds) as exc:  # the port's two refusals
            log.info(
                "send %s/%s: re-broadcast refused (%s)",
                record.client_id,
                record.request_id,
                exc.message,
            )
            rung = None
            if self._settings.automatic:
                rung = signed.next_rung("bump") or signed.next_rung("cancel")
            if rung is not None:
                return await self.replace(record, signed, rung, ChainStatus.DROPPED, request_id)
            return await self._moves.mark(record, signed, ChainStatus.DROPPED, request_id)
        except DomainError as exc:  # the node could not be asked: next run
            log.warning(
                "send %s/%s: re-broadcast failed (%s); next run",
                record.client_id,
                record.request_id,
                type(exc).__name__,
            )
            return Followed.PENDING
        entry = self._moves.entry(
            record,
            signed,
            SEND_REBROADCAST,
            request_id,
            target=signed.tx_hash,
            detail="dropped by the node; broadcast again",
        )
        return await self._moves.move(
            record, record.tracked(ChainStatus.PENDING, self._clock.now()), entry
        )

    async def _broadcast_quietly(
        self, gateway: ChainGateway, record: SendRecord, attempt: Attempt
    ) -> None:
        try:
            await gateway.broadcast(attempt.signed())
        except DomainError as exc:  # stored: the next run sees where it stands
            log.warning(
                "send %s/%s: broadcast of %s failed (%s); the next run asks again",
                record.client_id,
                record.request_id,
                attempt.tx_hash,
                exc.message,
            )

    async def resign(self, record: SendRecord, password: str | None, request_id: str) -> SendRecord:
        """Re-sign an expired transfer with a fresh fee quote (`password`: the user's,
        None for the platform wallet), store it, broadcast it; the record as it is after.
        A transfer of a chain that never re-signs is answered as it is.

        Only when every transaction it had can provably never land (`EXPIRED`); a fee over
        the cap is a 502 and changes nothing."""
        signed = SignedSend.from_bytes(record.raw_tx)
        gateway = self._gateways.get(signed.chain)
        chain_follower = follower(gateway)
        if gateway is None or chain_follower is None or not chain_follower.resigns:
            return record
        asset = self._catalog.asset_by_id(signed.asset_id)
        seen = await self._moves.sightings(chain_follower, signed, asset, stop_at_pending=False)
        _, after = await self.resign_expired(record, signed, gateway, seen, password, request_id)
        return after

    async def resign_expired(
        self,
        record: SendRecord,
        signed: SignedSend,
        gateway: ChainGateway,
        seen: list[tuple[Attempt, Sighting]],
        password: str | None,
        request_id: str,
    ) -> tuple[Followed, SendRecord]:
        """`resign` on what the chain said of each transaction (`seen`, asked once by the
        caller): the outcome, and the record as it is after."""
        if signed.recipient is None or signed.amount_units is None or signed.sender is None:
            raise InvalidRequest("this transfer was signed before re-signing existed")
        for attempt, sighting in seen:
            if sighting.is_final:
                outcome = await self._moves.settle(record, signed, attempt, sighting, request_id)
                return outcome, await self._moves.reload(record)
        if any(s is not Sighting.EXPIRED for _, s in seen):
            return Followed.PENDING, record  # one may still land: never sign a second one
        asset = self._catalog.asset_by_id(signed.asset_id)
        wallets = await self._wallets(record, signed)
        payer = signed.fee_payer_address or signed.sender
        transfer = Transfer(asset, signed.sender, signed.recipient, signed.amount_units, payer)
        fee = await gateway.fee(
            signed.sender,
            signed.recipient,
            asset,
            signed.amount_units,
            fee_payer=None if payer == signed.sender else payer,
        )
        cap = self._caps.units(signed.chain)
        if fee.native_units > cap:
            raise TransferRejected(
                "Transfer rejected: re-signing it would cost more than the fee cap "
                f"({fee.native_units} > {cap} base units); nothing was sent"
            )
        unsigned = await gateway.prepare(transfer, fee)
        try:
            transfer_signed, _ = await sign_transfer(
                self._keystore, gateway, unsigned, wallets, password
            )
        except BaseException:
            await gateway.release(unsigned)
            raise
        now = self._clock.now()
        attempt = Attempt(
            "resign", transfer_signed.tx_hash, transfer_signed.raw, fee.native_units, now
        )
        moved = signed.moved_to(attempt, now)
        new = record.tracked(
            ChainStatus.PENDING, now, raw_tx=moved.to_bytes(), tx_hash=attempt.tx_hash
        )
        entry = self._moves.entry(
            record,
            signed,
            SEND_RESIGN,
            request_id,
            target=attempt.tx_hash,
            detail=f"expired {signed.tx_hash} -> {attempt.tx_hash}, fee {attempt.fee_units}",
            event=send_note(
                EventType.SEND_REPLACED,
                moved,
                record.request_id,
                self._moves.catalog,
                replaced=signed.tx_hash,
            ),
        )
        outcome = await self._moves.move(record, new, entry)
        if outcome is not Followed.MOVED:
            await gateway.release(unsigned)
            return outcome, await self._moves.reload(record)
        await self._broadcast_quietly(gateway, new, attempt)
        return outcome, new

    async def _wallets(self, record: SendRecord, signed: SignedSend) -> Wallets:
        async with self._storage.read() as unit:
            if signed.user_id is None:
                sender = await platform_wallet(unit, record.client_id)
            else:
                sender = await user_wallet(unit, record.client_id, signed.user_id)
            sponsor = None
            if signed.fee_payer_address not in (None, signed.sender):
                sponsor = await platform_wallet(unit, record.client_id)
        return Wallets(sender, sponsor)


__all__ = ["Replacing"]
