"""Sends: `/send` (a user's wallet) and `/platform/send`, idempotent by X-Request-Id.

Rules:
- `X-Request-Id` is required (400 without): it is the idempotency key, through the stored
  send record (`walletcore.domain.sends`, docs/idempotency.md).
- The body is read first (ids, asset, recipient checked per chain, amount with the asset's
  decimals, password present). A body that fails there fails whatever the state, so it
  claims nothing: the client fixes it and may reuse the X-Request-Id.
- Then the record is claimed: finished -> its first result is replayed (nothing is signed
  or broadcast again); in flight -> 409; used by another request (its fingerprint: user,
  asset, recipient, amount, never the password) -> 422.
- Checks that depend on state (user, asset enabled, balances, fee payer) and the wallet
  password run next, before anything is signed; when one fails the record is released, so
  the same request (with the password corrected, say) can be sent again with the same id.
- Once signed, the transaction is stored before it is broadcast. A broadcast whose outcome
  is unknown (504) leaves it stored: a retry with the same id broadcasts the same bytes
  (the network knows them) and answers the same `txHash`; it never signs another. A
  broadcast the network refused (nothing sent) finishes the record with that error.
- A wrong wallet password: EVM and TRON `401 Invalid credentials`, SOLANA `401 Invalid
  password`, BITCOIN `400 Invalid password`.
- A user's send may not spend coins its sells hold (walletcore.domain.settlement): when
  the signed send is stored, in the same write unit and under the wallet's lock
  (`settlements.lock_wallet`), the balance it was planned on less what the wallet's sells
  hold must still cover the amount, else `400` and nothing is sent. The stored record
  carries what it spends (`SendRecord.spend`), which a sell's approval counts while the
  send is in flight: the two are one decision, whichever comes first.
- The withdrawal policy (walletcore.services.policies) decides every transfer (a send, a
  platform send, the desk's delivery or collection) after it is planned and before
  anything is prepared or unsealed: a refusal is `403` naming the rule, nothing signed;
  a transfer held for operators' approval answers its approval (`HeldReceipt`, the HTTP
  `202`) and is signed by the first retry of its request once approved. A transfer the
  policy counted and that is refused later (a wrong password) gives its count back.
- X-Request-Ids under `RESERVED_REQUEST_PREFIX` are the service's own transfers (a trade's
  delivery or collection): a client's send with one is a `400`.
- Every send is audited (action, request id, outcome, user, tx hash); never a password,
  a mnemonic or a key. The entries ride on the record's transitions (same write unit):
  - started -> signed carries `ok` with target = the tx hash, detail `signed`: committed
    before the broadcast, so every transaction that may reach the network has its entry,
    even when the process dies right after broadcasting it;
  - a request that resumes a send someone else signed (lease taken over) carries `ok`,
    detail `resumed`, on the transition that finishes it;
  - a broadcast the network refused finishes the record carrying that error's status;
  - a replay of a finished send changes nothing: `replay` (or the replayed error's status),
    written on its own; so are refusals before anything was signed, and a broadcast whose
    outcome is unknown (`504`, after the `ok` of its signing).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import (
    BroadcastTimeout,
    DomainError,
    IdempotencyConflict,
    InsufficientFunds,
    InvalidRequest,
    TransferRejected,
    WrongWalletPassword,
)
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.policies import ORIGIN_OF_ENDPOINT, Approval, Origin, WalletKind
from walletcore.domain.sends import ChainStatus, SendRecord, SendState, Spend
from walletcore.domain.settlement import RESERVED_REQUEST_PREFIX
from walletcore.domain.times import format_datetime
from walletcore.domain.wire import JsonValue
from walletcore.ports import (
    ChainGateway,
    Clock,
    KeyStore,
    SignedTransfer,
    Storage,
    UnitOfWork,
    UnsignedTransfer,
)
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.context import Caller
from walletcore.services.event_notes import send_note
from walletcore.services.policies import (
    DESK_INITIATOR,
    AwaitingApproval,
    Policies,
    initiator_of_client,
)
from walletcore.services.send_plan import (
    Plan,
    SendRequest,
    plan_platform_send,
    plan_user_send,
    read_amount,
    read_asset,
    read_user_id,
    show,
)
from walletcore.services.send_record import (
    Attempt,
    SendReceipt,
    SignedSend,
    failure_result,
    replay,
)
from walletcore.services.transfers import Transfers, Wallets, sign_transfer
from walletcore.services.wallet_access import (
    platform_wallet,
    platform_wallet_or_none,
    user_wallet,
)
from walletcore.services.wallets import given_password, password_error_for

log = logging.getLogger("walletcore.sends")


class SendService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        keystore: KeyStore,
        gateways: Mapping[Chain, ChainGateway],
        policy: AssetPolicy,
        auditor: Auditor,
        transfers: Transfers,
        policies: Policies,
    ) -> None:
        self._storage = storage
        self._policies = policies
        self._clock = clock
        self._keystore = keystore
        self._gateways = gateways
        self._policy = policy
        self._auditor = auditor
        self._transfers = transfers

    async def send(
        self,
        caller: Caller,
        *,
        request_id: str | None,
        user_id: JsonValue,
        asset_id: JsonValue,
        recipient: JsonValue,
        amount: JsonValue,
        password: JsonValue,
    ) -> SendReceipt | HeldReceipt:
        """`/send`: from the user's wallet; the fee payer rule of the asset applies. A
        transfer a withdrawal policy holds answers its approval (`HeldReceipt`)."""
        try:
            async with self._auditor.record(
                "wallet.send", caller.request_id, caller.client_id
            ) as note:
                key = _required(request_id)
                uid = read_user_id(user_id)
                note.user_id = uid
                asset = read_asset(self._policy.catalog, asset_id)
                request = SendRequest(
                    "send",
                    uid,
                    asset,
                    self._gateways[asset.chain].validate_address(recipient),
                    read_amount(amount, asset),
                    given_password(password),
                )

                async def plan() -> Plan:
                    resolved = self._policy.resolve(caller.client, asset.id, "send")
                    async with self._storage.read() as unit:
                        wallet = await user_wallet(unit, caller.client_id, uid)
                        sponsor = await platform_wallet_or_none(unit, caller.client_id)
                    return await plan_user_send(
                        request,
                        caller.client.fee_payer_for(resolved.id),
                        self._gateways[asset.chain],
                        self._policy.catalog.native_asset(asset.chain),
                        wallet,
                        sponsor,
                    )

                return await self._run(caller, key, request, plan, note)
        except AwaitingApproval as held:  # audited as the 202 it answers
            return HeldReceipt(held.approval)

    async def platform_send(
        self,
        caller: Caller,
        *,
        request_id: str | None,
        asset_id: JsonValue,
        recipient: JsonValue,
        amount: JsonValue,
    ) -> SendReceipt | HeldReceipt:
        """`/platform/send`: from the api client's platform wallet, which pays the fee."""
        try:
            async with self._auditor.record(
                "platform.send", caller.request_id, caller.client_id, target="platform"
            ) as note:
                key = _required(request_id)
                asset = read_asset(self._policy.catalog, asset_id)
                request = SendRequest(
                    "platform/send",
                    None,
                    asset,
                    self._gateways[asset.chain].validate_address(recipient),
                    read_amount(amount, asset),
                )

                async def plan() -> Plan:
                    self._policy.resolve(caller.client, asset.id, "platform/send")
                    async with self._storage.read() as unit:
                        wallet = await platform_wallet(unit, caller.client_id)
                    native = self._policy.catalog.native_asset(asset.chain)
                    return await plan_platform_send(
                        request, self._gateways[asset.chain], native, wallet
                    )

                return await self._run(caller, key, request, plan, note)
        except AwaitingApproval as held:  # audited as the 202 it answers
            return HeldReceipt(held.approval)

    async def transfer(
        self,
        caller: Caller,
        request_id: str,
        request: SendRequest,
        plan: Callable[[], Awaitable[Plan]],
        note: AuditNote,
    ) -> SendReceipt:
        """A transfer the service makes itself (a trade's delivery or collection) through
        the same idempotent flow as a send, under its own `request_id` (a reserved one):
        signed once, replayed when asked again, followed on chain like any send. The
        withdrawal policy checks it too: `AwaitingApproval` when a rule holds it."""
        if not request_id.startswith(RESERVED_REQUEST_PREFIX):
            raise ValueError("the service's own transfers use reserved request ids")
        return await self._run(caller, request_id, request, plan, note)

    # -- the idempotent flow ------------------------------------------------------------
    async def _run(
        self,
        caller: Caller,
        request_id: str,
        request: SendRequest,
        plan: Callable[[], Awaitable[Plan]],
        note: AuditNote,
    ) -> SendReceipt:
        async with self._storage.write() as unit:
            record = await unit.sends.begin(
                caller.client_id, request_id, request.fingerprint, self._clock.now()
            )
        note.target = record.tx_hash or note.target
        if record.is_finished:
            return await self._replay(record, request, note)
        if record.state is SendState.STARTED:
            record = await self._sign_and_store(record, request, plan, note)
            note.target = record.tx_hash  # audited even when the broadcast fails
        signed = SignedSend.from_bytes(record.raw_tx)
        if record.state is SendState.SIGNED:
            record = await self._broadcast(record, signed, note)
        receipt = signed.receipt(self._policy.catalog.native_asset(signed.chain))
        # accepted by the network: followed on chain when its sender is known (format 2)
        finished = record.finish(receipt.as_result(), self._clock.now(), follow=signed.followable)
        # A send this request signed has its entry; one it resumed gets it here.
        resumed = () if note.changed else (note.entry(detail="resumed"),)
        accepted = send_note(
            _SEND_EVENTS.get(receipt.status, EventType.SEND_PENDING),
            signed,
            request_id,
            self._policy.catalog,
        )
        if await self._advance(record, finished, *resumed, event=(signed.user_id, accepted)):
            note.carried(*resumed)
        else:
            log.info("send %s was finished by another request", request_id)
        return receipt

    async def _sign_and_store(
        self,
        record: SendRecord,
        request: SendRequest,
        plan: Callable[[], Awaitable[Plan]],
        note: AuditNote,
    ) -> SendRecord:
        """started -> signed. Anything failing before the signed transaction is stored
        proves nothing was sent: the record is released for a retry."""
        try:
            ready = await plan()
            await self._check_policy(record, request, ready, note)
            unsigned = await ready.gateway.prepare(ready.transfer, ready.fee)
        except BaseException as exc:
            await self._give_back(record, exc)
            await self._release(record)
            raise
        try:
            transfer, ladder = await self._sign(ready, unsigned, request.password)
            signed = SignedSend.of(ready, transfer, at=self._clock.now(), ladder=ladder)
            spend = _spend_of(request, ready)
            new = record.signed(signed.to_bytes(), transfer.tx_hash, self._clock.now(), spend=spend)
            entry = note.entry(target=transfer.tx_hash, detail="signed")
            guard = None if spend is None else _HeldCoins(ready, request, record.client_id)
            stored = await self._advance(record, new, entry, guard=guard)
        except BaseException as exc:
            await ready.gateway.release(unsigned)  # never broadcast: give its nonce back
            await self._give_back(record, exc)
            await self._release(record)
            raise
        if not stored:
            await ready.gateway.release(unsigned)
            raise IdempotencyConflict()  # taken over: the other request owns the send now
        note.carried(entry)
        return new

    async def _check_policy(
        self, record: SendRecord, request: SendRequest, plan: Plan, note: AuditNote
    ) -> None:
        """The withdrawal policy's decision, before anything is prepared or unsealed:
        `PolicyDenied` (403) or `AwaitingApproval` stop the transfer here."""
        origin = ORIGIN_OF_ENDPOINT[request.endpoint]
        platform = origin in (Origin.PLATFORM_SEND, Origin.DELIVERY)
        desk = origin in (Origin.DELIVERY, Origin.COLLECTION)
        await self._policies.check(
            record.client_id,
            record.request_id,
            wallet=WalletKind.PLATFORM if platform else WalletKind.USER,
            origin=origin,
            user_id=None if platform else request.user_id,
            asset=plan.asset,
            amount_units=request.amount_units,
            recipient=request.recipient,
            initiated_by=DESK_INITIATOR if desk else initiator_of_client(record.client_id),
            note=note,
        )

    async def _give_back(self, record: SendRecord, exc: BaseException) -> None:
        """A transfer refused after its policy counted it (a wrong password, too little
        balance): the count goes. Not when it is held, or another request took it over
        (that request's count is the same one), or the outcome is unknown."""
        if (
            isinstance(exc, DomainError)
            and exc.status < 500
            and not isinstance(exc, AwaitingApproval | IdempotencyConflict)
        ):
            await self._policies.give_back(record.client_id, record.request_id)

    async def _sign(
        self, plan: Plan, unsigned: UnsignedTransfer, password: str | None
    ) -> tuple[SignedTransfer, tuple[Attempt, ...]]:
        """The transfer and the rungs of its ladder, signed in one unseal per wallet."""
        ladder = self._transfers.ladder(plan.gateway, unsigned)
        wallets = Wallets(plan.sender_wallet, plan.sponsor_wallet)
        try:
            return await sign_transfer(
                self._keystore, plan.gateway, unsigned, wallets, password, ladder
            )
        except WrongWalletPassword:
            raise password_error_for(self._transfers.description(plan.asset.chain)) from None

    async def _replay(
        self, record: SendRecord, request: SendRequest, note: AuditNote
    ) -> SendReceipt:
        """A finished send asked again: its first error, or the transfer as it stands
        now (its current hash and fee; `pending`, `success` or `failed`). A user's send
        that expired unlanded (SOLANA, TRON: `dropped`) is re-signed with the password
        this replay carries."""
        if record.chain_status is None or record.raw_tx is None:
            return replay(record)  # an error, or a send not followed
        if record.chain_status is ChainStatus.DROPPED and request.password is not None:
            record = await self._resign_on_replay(record, request.password, note)
        signed = SignedSend.from_bytes(record.raw_tx)
        assert record.chain_status is not None
        native = self._policy.catalog.native_asset(signed.chain)
        return signed.receipt(native, record.chain_status.public)

    async def _resign_on_replay(
        self, record: SendRecord, password: str, note: AuditNote
    ) -> SendRecord:
        try:
            return await self._transfers.resign(record, password, note.request_id)
        except WrongWalletPassword:
            chain = SignedSend.from_bytes(record.raw_tx).chain
            raise password_error_for(self._transfers.description(chain)) from None

    async def _broadcast(
        self, record: SendRecord, signed: SignedSend, note: AuditNote
    ) -> SendRecord:
        """signed -> broadcast, or finished with the network's refusal."""
        gateway = self._gateways[signed.chain]
        try:
            await gateway.broadcast(SignedTransfer(signed.raw, signed.tx_hash))
        except DomainError as exc:
            if exc.status < 500 or isinstance(exc, TransferRejected):  # refused: nothing sent
                failed = record.finish(failure_result(exc), self._clock.now())
                refusal = note.entry(
                    outcome=str(exc.status), target=signed.tx_hash, detail=exc.message
                )
                if await self._advance(record, failed, refusal):
                    note.carried(refusal)
                raise
            await self._release(record)
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure: the outcome is unknown
            log.warning("broadcast of %s failed: %s", signed.tx_hash, type(exc).__name__)
            await self._release(record)
            raise BroadcastTimeout() from None
        except BaseException:
            await self._release(record)
            raise
        new = record.broadcast(self._clock.now())
        if not await self._advance(record, new):
            raise IdempotencyConflict()
        return new

    async def _advance(
        self,
        current: SendRecord,
        new: SendRecord,
        *audit: AuditEntry,
        event: tuple[str | None, EventNote] | None = None,
        guard: _HeldCoins | None = None,
    ) -> bool:
        """The record's compare-and-set, with the entries it carries and the event it
        publishes (for the user id given), in one write unit; after `guard`'s check of
        the wallet's held coins, in that unit, when given."""
        async with self._storage.write() as unit:
            if guard is not None:
                await guard.check(unit)
            if not await unit.sends.advance(current, new):
                return False
            for entry in audit:
                await unit.audit.append(entry)
            if event is not None:
                await unit.events.publish(current.client_id, event[0], event[1], new.updated_at)
        return True

    async def _release(self, record: SendRecord) -> None:
        """Give the lease up so a retry resumes at once (best effort: it lapses anyway)."""
        try:
            await self._advance(record, record.release(self._clock.now()))
        except Exception:  # the original error is the one to report
            log.warning("could not release send record %s", record.request_id, exc_info=True)


@dataclass(frozen=True, slots=True)
class HeldReceipt:
    """The answer to a send a withdrawal policy holds for operators' approval: nothing is
    signed; the same request, sent again once approved, signs and sends it (once)."""

    approval: Approval

    def as_result(self) -> dict[str, JsonValue]:
        approval = self.approval
        return {
            "txHash": None,
            "status": "awaiting_approval",
            "approvalId": approval.id,
            "rule": approval.rule,
            "approvals": len(approval.approvers),
            "required": approval.required,
            "expiresAt": format_datetime(approval.expires_at),
        }


#: The event of a send the network accepted, by the status its answer had.
_SEND_EVENTS = {
    "pending": EventType.SEND_PENDING,
    "success": EventType.SEND_SUCCESS,
    "failed": EventType.SEND_FAILED,
}


def _required(request_id: str | None) -> str:
    if not request_id:
        raise InvalidRequest("X-Request-Id is required on a send: it is the idempotency key")
    if request_id.startswith(RESERVED_REQUEST_PREFIX):
        raise InvalidRequest(
            f"X-Request-Id may not start with {RESERVED_REQUEST_PREFIX} (the service's own "
            "transfers use those)"
        )
    return request_id


def _spend_of(request: SendRequest, plan: Plan) -> Spend | None:
    """What a user's own send (`/send`) takes out of the wallet; None for the others."""
    if request.endpoint != "send" or request.user_id is None or plan.balance_units is None:
        return None
    return Spend(request.user_id, request.asset.id, request.amount_units)


class _HeldCoins:
    """The check, in the unit that stores a user's signed send, that the coins it spends
    are not held by the wallet's sells (module rules)."""

    def __init__(self, plan: Plan, request: SendRequest, client_id: str) -> None:
        assert plan.balance_units is not None and request.user_id is not None
        self._balance = plan.balance_units
        self._asset = request.asset
        #: what leaves the wallet in the asset: the amount, and the fee when it pays it in it
        user_fee = plan.asset.is_native and plan.fee_payer is FeePayer.USER
        self._units = request.amount_units + (plan.fee.native_units if user_fee else 0)
        self._needs = " with its network fee" if user_fee else ""
        self._client_id = client_id
        self._user_id = request.user_id

    async def check(self, unit: UnitOfWork) -> None:
        await unit.settlements.lock_wallet(self._client_id, self._user_id)
        held = await unit.settlements.held(self._client_id, self._user_id, self._asset.id)
        if held and self._balance - held < self._units:
            free = max(self._balance - held, 0)
            raise InsufficientFunds(
                f"Insufficient {self._asset.symbol} balance: the wallet holds "
                f"{show(self._balance, self._asset)}, of which {show(held, self._asset)} "
                f"are reserved for sells being settled; {show(free, self._asset)} can be "
                f"sent, the send needs {show(self._units, self._asset)}{self._needs}"
            )


__all__ = ["HeldReceipt", "SendReceipt", "SendService"]
