"""The transfer lifecycle: every broadcast followed to its end (docs/transfers.md).

A send's idempotency record (walletcore.domain.sends) holds one transfer: its current
transaction and the ones it had before (`SignedSend.earlier`), and the rungs of its
pre-signed ladder (`SignedSend.ladder`). On chains whose gateway is a `TransferFollower`
(walletcore.ports.follow) the `follow_sends` job calls `Transfers.follow` on each send not
final yet:

- every transaction of the transfer is asked of the chain (`sighting`), the current one
  first; the first found final settles the transfer (`success`; `failed` when it reverted
  or when it is a cancel), and becomes its current transaction;
- the current one pending longer than the chain's `stuck_after_seconds`: `stuck`, and with
  automatic bumping (`WALLETCORE_FEE_BUMP=auto`) the next `bump` rung takes its place;
- missing from the node (evicted, dropped): `dropped`, and the same bytes are broadcast
  again; refused now (underpriced, say), the next bump rung, else the cancel, re-fills its
  place (an EVM nonce never stays empty, so later sends never wait behind it);
- taken over by a transaction this service did not send: `failed`;
- expired (SOLANA, TRON: it can never land as signed): re-signed with a fresh blockhash or
  reference block, by the job for a platform send (its key opens without a password), on
  the client's `/send` replay for a user's send (the replay carries the password); `dropped`
  until then.

A replacement is stored (compare and set on the transfer's current hash, with its audit
entry) before it is broadcast: two runs racing store one, and a re-signed transfer is never
signed twice. Broadcasting a stored rung again is harmless (the same bytes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from enum import Enum
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InvalidRequest,
    NotFound,
    ServerError,
    TransactionNotFound,
    TransferRejected,
    WrongWalletPassword,
)
from walletcore.domain.money import to_base_units
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.domain.wallet import WalletRecord
from walletcore.ports import (
    ChainGateway,
    ChainSigner,
    Clock,
    KeyStore,
    SignedTransfer,
    Storage,
    Transfer,
    UnsignedTransfer,
)
from walletcore.ports.follow import Replacement, Sighting, TransferFollower
from walletcore.services.audit import Auditor
from walletcore.services.send_record import Attempt, SignedSend
from walletcore.services.wallet_access import platform_wallet, user_wallet

log = logging.getLogger("walletcore.transfers")

#: Audit actions of the lifecycle (the final move is `send.settle`, as before).
SEND_SETTLE = "send.settle"
SEND_REPLACE = "send.replace"
SEND_REBROADCAST = "send.rebroadcast"
SEND_RESIGN = "send.resign"

#: The most a replacement may cost, per chain, in the native coin (`WALLETCORE_FEE_CAPS`).
DEFAULT_FEE_CAPS: dict[Chain, Decimal] = {
    Chain.BITCOIN: Decimal("0.0005"),
    Chain.ETHEREUM: Decimal("0.005"),
    Chain.BSC: Decimal("0.005"),
    Chain.POLYGON: Decimal(5),
    Chain.TRON: Decimal(100),
    Chain.SOLANA: Decimal("0.001"),
}


class TransferSettings(BaseSettings):
    """`WALLETCORE_FEE_BUMP`, `WALLETCORE_FEE_CAPS` (docs/transfers.md)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: `auto`: the follow job bumps stuck sends, re-fills dropped ones and re-signs expired
    #: platform sends; `manual`: only `walletcore sends bump|cancel` replaces (a dropped
    #: send's same bytes are still broadcast again: that replaces nothing).
    fee_bump: Literal["auto", "manual"] = "auto"
    #: Chain -> the most one transaction of a transfer may cost in fees, in the chain's
    #: native coin (a decimal string); chains left out keep `DEFAULT_FEE_CAPS`.
    fee_caps: dict[Chain, Decimal] = Field(default_factory=dict)

    def cap_units(self, chain: Chain, native: Asset) -> int:
        """The chain's cap in base units of `native`, its coin (the catalog's)."""
        cap = self.fee_caps.get(chain, DEFAULT_FEE_CAPS[chain])
        return to_base_units(cap, native.decimals)

    @property
    def automatic(self) -> bool:
        return self.fee_bump == "auto"


class Followed(Enum):
    SETTLED = "settled"  # final now, stored by this run
    MOVED = "moved"  # not final; its state or transaction changed (stored by this run)
    LOST = "lost"  # another run stored its move first
    PENDING = "pending"  # unchanged: asked again later
    SKIPPED = "skipped"  # cannot be asked about (no sender, chain not configured)


@dataclass(frozen=True, slots=True)
class Wallets:
    """The wallets a transfer is signed with: the sender's, and the sponsor's when the
    platform pays the fee of a user's send."""

    sender: WalletRecord
    sponsor: WalletRecord | None = None


#: A platform wallet (a sender or a sponsor) that the operator's master key cannot open.
PLATFORM_UNOPENABLE = "The platform wallet cannot be opened; contact the operator"


async def sign_transfer(
    keystore: KeyStore,
    gateway: ChainGateway,
    unsigned: UnsignedTransfer,
    wallets: Wallets,
    password: str | None,
    replacements: Sequence[Replacement] = (),
) -> tuple[SignedTransfer, tuple[Attempt, ...]]:
    """Sign `unsigned` and the rungs of its ladder in one unseal per wallet; the signed
    transfer and the signed rungs (not broadcast: `at` None)."""
    chain = gateway.chain
    transfer = unsigned.transfer
    todo = [unsigned, *(r.unsigned for r in replacements)]
    signatures: list[dict[str, bytes]] = [{} for _ in todo]
    try:
        async with keystore.unseal(wallets.sender.sealed, password, chain) as key:
            for index, item in enumerate(todo):
                if transfer.sender in item.transfer.signers:
                    signatures[index][transfer.sender] = _sign_as(
                        key, transfer.sender, item.payload_for(transfer.sender)
                    )
    except WrongWalletPassword:
        if password is None:  # the platform wallet: the operator's master key changed
            raise ServerError(PLATFORM_UNOPENABLE) from None
        raise
    if wallets.sponsor is not None:
        payer = transfer.fee_payer
        try:
            async with keystore.unseal(wallets.sponsor.sealed, None, chain) as key:
                for index, item in enumerate(todo):
                    if payer in item.transfer.signers:
                        signatures[index][payer] = _sign_as(key, payer, item.payload_for(payer))
        except WrongWalletPassword:
            # the sponsor is the platform wallet, whatever the sender's password: never the
            # user's wrong-password answer for an operator's problem
            raise ServerError(PLATFORM_UNOPENABLE) from None
    signed = gateway.assemble(unsigned, signatures[0])
    rungs = tuple(
        Attempt(r.kind, s.tx_hash, s.raw, r.fee_units)
        for r, s in (
            (r, gateway.assemble(r.unsigned, sigs))
            for r, sigs in zip(replacements, signatures[1:], strict=True)
        )
    )
    return signed, rungs


def _sign_as(key: ChainSigner, address: str, payload: bytes) -> bytes:
    """Sign only with the key of the stored address (a mismatch would send from elsewhere)."""
    if key.address != address:
        raise ServerError("The wallet's key does not match its stored address")
    return key.sign(payload)


def follower(gateway: ChainGateway | None) -> TransferFollower | None:
    return gateway if isinstance(gateway, TransferFollower) else None


class Transfers:
    """The lifecycle of the transfers: followed by the job, replaced by the operator, and
    re-signed on a `/send` replay (see the module's docstring)."""

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        keystore: KeyStore,
        gateways: Mapping[Chain, ChainGateway],
        settings: TransferSettings | None = None,
        *,
        catalog: Catalog,
    ) -> None:
        self._storage = storage
        self._catalog = catalog
        self._clock = clock
        self._keystore = keystore
        self._gateways = gateways
        self.settings = settings or TransferSettings()
        self._auditor = Auditor(storage, clock)

    def cap_units(self, chain: Chain) -> int:
        """The most one transaction on `chain` may cost in fees, in its coin's base units."""
        return self.settings.cap_units(chain, self._catalog.native_asset(chain))

    # -- the ladder, when a send is signed --------------------------------------------
    def ladder(self, gateway: ChainGateway, unsigned: UnsignedTransfer) -> list[Replacement]:
        """The rungs to sign with `unsigned` (none when its gateway re-signs instead)."""
        chain_follower = follower(gateway)
        if chain_follower is None or chain_follower.resigns:
            return []
        cap = self.cap_units(gateway.chain)
        rungs = list(chain_follower.replacements(unsigned, cap))
        for rung in rungs:
            if rung.fee_units > cap:  # a gateway's bug must never spend past the cap
                raise ServerError("a replacement's fee crosses the cap; nothing was signed")
        return rungs

    # -- the follow job -----------------------------------------------------------------
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
        seen = await self._sightings(chain_follower, signed, asset, stop_at_pending=True)
        for attempt, sighting in seen:
            if sighting.is_final:
                return await self._settle(record, signed, attempt, sighting, request_id)
        return await self._keep_going(record, signed, gateway, chain_follower, seen, request_id)

    async def _sightings(
        self,
        chain_follower: TransferFollower,
        signed: SignedSend,
        asset: Asset,
        *,
        stop_at_pending: bool,
    ) -> list[tuple[Attempt, Sighting]]:
        """What the chain says of each transaction of the transfer, the current one first.
        A current one the node holds means no earlier one can land: they are not asked."""
        assert signed.sender is not None
        seen: list[tuple[Attempt, Sighting]] = []
        for attempt in signed.attempts:
            sighting = await chain_follower.sighting(signed.sender, asset, attempt.signed())
            seen.append((attempt, sighting))
            if sighting.is_final:
                break
            if stop_at_pending and sighting is Sighting.PENDING and not seen[:-1]:
                break
        return seen

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
            return await self._refill(record, signed, gateway, request_id)
        if current is Sighting.PENDING:
            since = signed.at or record.chain_checked_at or record.updated_at
            if now - since >= timedelta(seconds=chain_follower.stuck_after_seconds):
                rung = signed.next_rung("bump") if self.settings.automatic else None
                if rung is not None:
                    return await self._replace(record, signed, rung, ChainStatus.STUCK, request_id)
                return await self._mark(record, signed, ChainStatus.STUCK, request_id)
            return await self._mark(record, signed, ChainStatus.PENDING, request_id)
        if Sighting.PENDING in others or Sighting.MISSING in others:
            # the current one can never land, an earlier one still may (mined, not deep yet)
            return await self._mark(record, signed, ChainStatus.PENDING, request_id)
        if current is Sighting.EXPIRED and chain_follower.resigns:
            if self.settings.automatic and signed.user_id is None:
                outcome, _ = await self._resign(record, signed, gateway, seen, None, request_id)
                return outcome
            return await self._mark(record, signed, ChainStatus.DROPPED, request_id)
        # every transaction of the transfer can never land and none was mined: another
        # transaction took their place (or, on a chain that never re-signs, they expired)
        return await self._settle(record, signed, signed.current, current, request_id)

    async def _refill(
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
            if self.settings.automatic:
                rung = signed.next_rung("bump") or signed.next_rung("cancel")
            if rung is not None:
                return await self._replace(record, signed, rung, ChainStatus.DROPPED, request_id)
            return await self._mark(record, signed, ChainStatus.DROPPED, request_id)
        except DomainError as exc:  # the node could not be asked: next run
            log.warning(
                "send %s/%s: re-broadcast failed (%s); next run",
                record.client_id,
                record.request_id,
                type(exc).__name__,
            )
            return Followed.PENDING
        entry = self._entry(
            record,
            signed,
            SEND_REBROADCAST,
            request_id,
            target=signed.tx_hash,
            detail="dropped by the node; broadcast again",
        )
        return await self._move(
            record, record.tracked(ChainStatus.PENDING, self._clock.now()), entry
        )

    async def _mark(
        self, record: SendRecord, signed: SignedSend, status: ChainStatus, request_id: str
    ) -> Followed:
        if record.chain_status is status:
            return Followed.PENDING  # `checked_chain` puts it behind the others
        entry = None
        if status is not ChainStatus.PENDING:
            entry = self._entry(
                record,
                signed,
                "send." + status.value,
                request_id,
                target=signed.tx_hash,
                detail=f"{record.chain_status} -> {status.value}",
            )
        return await self._move(record, record.tracked(status, self._clock.now()), entry)

    async def _replace(
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
        entry = self._entry(
            record,
            signed,
            SEND_REPLACE,
            request_id,
            target=attempt.tx_hash,
            detail=f"{text}{detail}",
        )
        outcome = await self._move(record, new, entry)
        if outcome is not Followed.MOVED:
            return outcome
        log.info("send %s/%s: %s", record.client_id, record.request_id, text)
        await self._broadcast_quietly(self._gateways[signed.chain], record, attempt)
        return outcome

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

    async def _settle(
        self,
        record: SendRecord,
        signed: SignedSend,
        attempt: Attempt,
        sighting: Sighting,
        request_id: str,
    ) -> Followed:
        cancelled = attempt.kind == "cancel"
        status = (
            ChainStatus.SUCCESS
            if sighting is Sighting.SUCCESS and not cancelled
            else ChainStatus.FAILED
        )
        now = self._clock.now()
        moved = signed if attempt.tx_hash == signed.tx_hash else signed.moved_to(attempt, now)
        detail = f"{record.chain_status} -> {status.value}"
        if cancelled and sighting is Sighting.SUCCESS:
            detail += " (cancelled)"
        elif sighting is Sighting.CONFLICT:
            detail += " (its place was taken by a transaction this service did not send)"
        elif sighting is Sighting.EXPIRED:
            detail += " (expired: it can never land)"
        new = record.tracked(
            status,
            now,
            raw_tx=None if moved is signed else moved.to_bytes(),
            tx_hash=None if moved is signed else attempt.tx_hash,
        )
        entry = self._entry(
            record, signed, SEND_SETTLE, request_id, target=attempt.tx_hash, detail=detail
        )
        outcome = await self._move(record, new, entry)
        if outcome is Followed.MOVED:
            log.info(
                "send %s/%s: %s %s",
                record.client_id,
                record.request_id,
                attempt.tx_hash,
                status.value,
            )
            return Followed.SETTLED
        return outcome

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
        return await self._settle(record, signed, signed.current, sighting, request_id)

    async def _move(
        self, record: SendRecord, new: SendRecord, entry: AuditEntry | None
    ) -> Followed:
        async with self._storage.write() as unit:
            moved = await unit.sends.track(record, new, entry=entry)
        if not moved:
            log.info("send %s/%s was moved by another run", record.client_id, record.request_id)
            return Followed.LOST
        return Followed.MOVED

    def _entry(
        self,
        record: SendRecord,
        signed: SignedSend,
        action: str,
        request_id: str,
        *,
        target: str,
        detail: str,
    ) -> AuditEntry:
        return self._auditor.entry(
            action,
            request_id,
            record.client_id,
            user_id=signed.user_id,
            target=target,
            detail=detail,
        )

    # -- re-signing (SOLANA, TRON) --------------------------------------------------------
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
        seen = await self._sightings(chain_follower, signed, asset, stop_at_pending=False)
        _, after = await self._resign(record, signed, gateway, seen, password, request_id)
        return after

    async def _resign(
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
                outcome = await self._settle(record, signed, attempt, sighting, request_id)
                return outcome, await self._reload(record)
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
        cap = self.cap_units(signed.chain)
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
        entry = self._entry(
            record,
            signed,
            SEND_RESIGN,
            request_id,
            target=attempt.tx_hash,
            detail=f"expired {signed.tx_hash} -> {attempt.tx_hash}, fee {attempt.fee_units}",
        )
        outcome = await self._move(record, new, entry)
        if outcome is not Followed.MOVED:
            await gateway.release(unsigned)
            return outcome, await self._reload(record)
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

    async def _reload(self, record: SendRecord) -> SendRecord:
        async with self._storage.read() as unit:
            found = await unit.sends.get(record.client_id, record.request_id)
        return found or record

    # -- the operator (`walletcore sends show|bump|cancel`) -------------------------------
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
            outcome = await self._replace(
                record,
                signed,
                rung,
                record.chain_status or ChainStatus.PENDING,
                request_id_audit,
                detail=" (operator)",
            )
            if outcome is Followed.LOST:
                raise InvalidRequest("the send moved meanwhile; show it and try again")
        return describe(await self._reload(record))

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
        seen = await self._sightings(chain_follower, signed, asset, stop_at_pending=False)
        expired = all(s is Sighting.EXPIRED for _, s in seen)
        if not expired:
            raise InvalidRequest(
                f"{signed.chain.value} has no fee replacement: a transfer is re-signed or "
                "cancelled only once it can provably never land (its blockhash or expiration "
                "lapsed); the follow job re-broadcasts it until then"
            )
        if cancel:
            await self._settle(record, signed, signed.current, Sighting.EXPIRED, request_id)
            return
        if signed.user_id is not None:
            raise InvalidRequest(
                "a user's transfer is re-signed with the user's password: the client "
                "replays its /send with the same X-Request-Id"
            )
        await self._resign(record, signed, self._gateways[signed.chain], seen, None, request_id)

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


__all__ = [
    "DEFAULT_FEE_CAPS",
    "Followed",
    "TransferSettings",
    "Transfers",
    "Wallets",
    "describe",
    "follower",
    "sign_transfer",
]
