"""Trades that move coins: a completed buy delivered from the desk, a completed sell
collected to it, each exactly once (walletcore.domain.settlement has the states).

Rules:
- The desk is the api client's platform wallet. A buy's delivery is a transfer from it to
  the user's address on the asset's chain; the desk pays the network fee, so the user
  receives the bought amount exactly. A sell's collection is a transfer from the user's
  wallet to the desk of the sold amount; its fee follows the asset's fee payer (`USER`:
  out of the wallet, on top of the amount; `PLATFORM`: the desk sponsors it as it does a
  user's send, and the wallet pays when the desk cannot).
- Approval (`reserve`), before the venue is called and before the trade leaves `open`:
  - a sell's coins are held: in one write unit under the wallet's lock, the balance read
    on chain less what the wallet's other sells hold and less what its own sends in flight
    spend must cover the amount (and, when the wallet pays it, the collection's fee):
    else `400`, and nothing trades;
  - a buy is recorded as owed by the desk.
  Either way the settlement exists before any order does, so a process killed between the
  fill and the transfer leaves a `reserved` settlement the jobs carry on.
- When the trade ends (`follow`, on the request that saw it end or on a job run):
  completed -> the buy is queued and delivered; the sell is collected when the request
  carries the wallet password (`/trade/approve` with `password`, `/trade/collect`), else it
  waits `awaiting_password`; failed, expired, reopened or cancelled -> released.
- A delivery the desk cannot make (short of the asset or of fee coin, no platform wallet,
  no address of the user on the chain, the asset's deliveries paused by the desk's
  reconciliation: walletcore.services.desk) is `short` with the reason, and tried again
  every `retry_seconds` by the jobs; never silent, never sent twice.
- Transfers go through the sends' idempotent flow (`SendService.transfer`) under the
  settlement's `transfer_key`: one signature per attempt, replayed when asked again,
  followed on chain by the lifecycle jobs (bump, re-fill, re-sign). `sent` becomes
  `settled` when that send succeeds on chain, `failed` when it fails (a buy is tried again
  under the next attempt, up to `max_attempts`; a sell waits for the next `/trade/collect`).
- Every move is a compare-and-set on (status, attempt) carrying its audit entry and its
  event (`settlement.<status>`) in the same write unit.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import Decimal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import (
    Conflict,
    DomainError,
    IdempotencyConflict,
    InsufficientFunds,
    InvalidRequest,
    WrongWalletPassword,
)
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.money import format_balance, to_base_units
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletRecord
from walletcore.ports import ChainGateway, Clock, KeyStore, Storage, Transfer, UnitOfWork
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.context import Caller
from walletcore.services.policies import AwaitingApproval
from walletcore.services.send_plan import (
    Plan,
    SendRequest,
    held,
    plan_platform_send,
    show,
    sponsored_fee,
    wallet_address,
)
from walletcore.services.sends import SendService
from walletcore.services.transfers import Transfers
from walletcore.services.wallet_access import platform_wallet_or_none, user_wallet
from walletcore.services.wallets import password_error_for

log = logging.getLogger("walletcore.settlements")


class SettlementSettings(BaseSettings):
    """`WALLETCORE_SETTLEMENT_*` (docs/settlement.md)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_SETTLEMENT_", extra="ignore")

    #: Trades move coins (the desk delivers buys and collects sells); off: a trade is the
    #: record of a venue order only, and an embedder settles it
    enabled: bool = True
    #: How long a delivery the desk could not make waits before it is tried again
    retry_seconds: float = Field(default=60.0, gt=0)
    #: How often a sent transfer is looked at until it is final (the lifecycle jobs follow it)
    follow_seconds: float = Field(default=15.0, gt=0)
    #: Transfers of one buy's delivery tried before it stays `failed` for the operator
    max_attempts: int = Field(default=3, ge=1)


_EVENTS = {
    SettlementStatus.RESERVED: EventType.SETTLEMENT_RESERVED,
    SettlementStatus.AWAITING_PASSWORD: EventType.SETTLEMENT_AWAITING_PASSWORD,
    SettlementStatus.SHORT: EventType.SETTLEMENT_SHORT,
    SettlementStatus.SENT: EventType.SETTLEMENT_SENT,
    SettlementStatus.SETTLED: EventType.SETTLEMENT_SETTLED,
    SettlementStatus.FAILED: EventType.SETTLEMENT_FAILED,
    SettlementStatus.RELEASED: EventType.SETTLEMENT_RELEASED,
}
#: The trade statuses after which a reserved settlement is released (nothing traded). An
#: `open` trade is one only when its approval says so (`follow(..., reopened=True)`: the
#: venue placed nothing) or its quote lapsed: an approval in progress holds a `reserved`
#: settlement while its trade is still `open`, and that must not be released under it.
_UNFILLED = frozenset({TradeStatus.FAILED, TradeStatus.EXPIRED, TradeStatus.CANCELLED})


@dataclass(slots=True)
class SettlementRun:
    """What one run of the settlement job did."""

    looked_at: int = 0
    moved: int = 0
    errors: int = 0


#: Addresses one process remembers (about 200 bytes each).
_REMEMBERED_ADDRESSES = 100_000


class NothingToCollect(Conflict):
    default_message = "Nothing to collect: only a completed sell's coins are collected"


class Settlements:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        keystore: KeyStore,
        gateways: Callable[[], Mapping[Chain, ChainGateway]],
        policy: AssetPolicy,
        auditor: Auditor,
        transfers: Callable[[], Transfers],
        sends: Callable[[], SendService],
        *,
        retry_seconds: float = 60.0,
        follow_seconds: float = 15.0,
        max_attempts: int = 3,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._keystore = keystore
        self._build_gateways = gateways
        self._policy = policy
        self._auditor = auditor
        #: built on first use: a process whose trades never move coins builds no chain's
        #: transfer machinery for them
        self._build_transfers = transfers
        self._build_sends = sends
        self._retry = timedelta(seconds=retry_seconds)
        self._follow = timedelta(seconds=follow_seconds)
        self.max_attempts = max_attempts
        #: (client, user or None for the desk, chain) -> address (`_addresses`)
        self._known: dict[tuple[str, str | None, Chain], str] = {}

    def _gateway(self, chain: Chain) -> ChainGateway:
        return self._build_gateways()[chain]

    def _transfers(self) -> Transfers:
        return self._build_transfers()

    def _sends(self) -> SendService:
        return self._build_sends()

    # -- approval -------------------------------------------------------------------------
    async def check_password(self, caller: Caller, trade: Trade, secret: str | None) -> None:
        """The wallet password an approval or a collection carries (read by the caller with
        `given_password`: 400 when malformed), checked against the user's wallet before
        anything trades (the chain's wrong-password answer); nothing when none was given.
        Only a sell takes one."""
        if secret is None:
            return
        if trade.side is not Side.SELL:
            raise InvalidRequest("password is taken only when approving a sell")
        asset = self._policy.catalog.asset_by_id(trade.asset_id)
        async with self._storage.read() as unit:
            wallet = await user_wallet(unit, caller.client_id, trade.user_id)
        try:
            async with self._keystore.unseal(wallet.sealed, secret, asset.chain):
                pass
        except WrongWalletPassword:
            raise password_error_for(self._transfers().description(asset.chain)) from None

    async def reserve(self, caller: Caller, trade: Trade, balance: int | None = None) -> Settlement:
        """The settlement of a trade being approved, before its order exists (module rules):
        a sell's coins held out of `balance` (what the wallet holds of the asset, read by
        the approval), or `400`; a buy owed by the desk. The settlement as stored after."""
        asset = self._policy.catalog.asset_by_id(trade.asset_id)
        units = _units(trade.quote.crypto_amount, asset)
        now = self._clock.now()
        settlement = Settlement(
            trade_id=trade.trade_id,
            client_id=trade.client_id,
            user_id=trade.user_id,
            side=trade.side,
            asset_id=asset.id,
            units=units,
            status=SettlementStatus.RESERVED,
            created_at=now,
            updated_at=now,
            due_at=now + self._follow,
        )
        if trade.side is Side.BUY:
            async with self._storage.write() as unit:
                stored = await unit.settlements.get(trade.client_id, trade.trade_id)
                if stored is None:
                    await unit.settlements.add(
                        settlement, entry=self._entry(caller, None, settlement)
                    )
                    return settlement
                if stored.status is SettlementStatus.RELEASED:
                    again = replace(settlement, attempt=stored.attempt)
                    if await self._move_in(unit, caller, stored, again):
                        return again
                return stored
        return await self._hold(caller, trade, asset, settlement, balance)

    async def _hold(
        self,
        caller: Caller,
        trade: Trade,
        asset: Asset,
        settlement: Settlement,
        balance: int | None,
    ) -> Settlement:
        native = self._policy.catalog.native_asset(asset.chain)
        user_pays = caller.client.fee_payer_for(asset.id) is FeePayer.USER
        fee_units = 0
        native_balance = balance
        if balance is None or user_pays:
            sender, recipient = await self._addresses(caller.client_id, trade.user_id, asset.chain)
            if balance is None:
                balance = (
                    0 if sender is None else await held(self._gateway(asset.chain), sender, asset)
                )
            native_balance = balance
            if user_pays and sender is not None and recipient is not None:
                gateway = self._gateway(asset.chain)
                quote = await gateway.fee(sender, recipient, asset, settlement.units)
                fee_units = quote.native_units
                if fee_units and not asset.is_native:
                    native_balance = await held(gateway, sender, native)
        assert balance is not None and native_balance is not None
        settlement = replace(settlement, fee_units=fee_units, fee_asset_id=native.id)
        async with self._storage.write() as unit:
            await unit.settlements.lock_wallet(caller.client_id, trade.user_id)
            stored = await unit.settlements.get(caller.client_id, trade.trade_id)
            if stored is not None and stored.status is not SettlementStatus.RELEASED:
                return stored  # held already (a concurrent approval of the same trade)
            user = trade.user_id
            if asset.is_native:  # the amount and its fee out of the same coin
                units = settlement.units
                await self._check_free(unit, caller, user, asset, balance, units, fee_units)
            else:
                await self._check_free(unit, caller, user, asset, balance, settlement.units)
                if fee_units:
                    await self._check_free(
                        unit, caller, user, native, native_balance, fee_units, fee_only=True
                    )
            if stored is None:
                await unit.settlements.add(settlement, entry=self._entry(caller, None, settlement))
                return settlement
            again = replace(settlement, attempt=stored.attempt)
            await self._move_in(unit, caller, stored, again)
            return again

    async def _addresses(
        self, client_id: str, user_id: str, chain: Chain
    ) -> tuple[str | None, str | None]:
        """The user's and the desk's addresses on `chain` (None: none there yet), remembered
        once known: an address derived from a sealed seed never changes (a chain not known
        yet is read again). The user's wallet must exist (404)."""
        user_key, desk_key = (client_id, user_id, chain), (client_id, None, chain)
        sender, recipient = self._known.get(user_key), self._known.get(desk_key)
        if sender is not None and recipient is not None:
            return sender, recipient
        async with self._storage.read() as unit:
            wallet = await user_wallet(unit, client_id, user_id)
            desk = await platform_wallet_or_none(unit, client_id)
        sender = wallet.addresses.get(chain)
        recipient = None if desk is None else desk.addresses.get(chain)
        if len(self._known) >= _REMEMBERED_ADDRESSES:
            self._known.clear()  # bounded: start over rather than grow
        if sender is not None:
            self._known[user_key] = sender
        if recipient is not None:
            self._known[desk_key] = recipient
        return sender, recipient

    async def _check_free(
        self,
        unit: UnitOfWork,
        caller: Caller,
        user_id: str,
        asset: Asset,
        balance: int,
        units: int,
        fee_units: int = 0,
        *,
        fee_only: bool = False,
    ) -> None:
        """`400` unless the wallet's `balance` of `asset`, less what its sells hold and its
        sends in flight spend, covers `units` and `fee_units` (the collection's fee, when
        the wallet pays it in this coin). `fee_only`: `units` is that fee, in the chain's
        coin, of a token's sell."""
        holding = await unit.settlements.held(caller.client_id, user_id, asset.id)
        spending = await unit.sends.spending(caller.client_id, user_id, asset.id)
        free = balance - holding - spending
        if free >= units + fee_units:
            return
        holds = show(balance, asset)
        if holding or spending:
            holds = (
                f"{holds}, of which {show(max(free, 0), asset)} are free "
                f"({show(holding + spending, asset)} reserved for sells being settled or spent "
                "by sends in flight)"
            )
        if fee_only:
            raise InsufficientFunds(
                f"Not enough {asset.symbol} for the network fee of collecting the sold coins: "
                f"the wallet holds {holds}, the fee is {show(units, asset)}"
            )
        fee = (
            f" and the {show(fee_units, asset)} network fee of collecting them" if fee_units else ""
        )
        raise InsufficientFunds(
            f"The wallet holds {holds}, less than the {show(units, asset)} to sell{fee}"
        )

    async def taken(self, client_id: str, user_id: str, asset_id: int) -> int:
        """What of the wallet's asset its sells hold and its sends in flight spend: not
        free to sell (a quote's check; the approval checks again under the lock)."""
        async with self._storage.read() as unit:
            holding = await unit.settlements.held(client_id, user_id, asset_id)
            return holding + await unit.sends.spending(client_id, user_id, asset_id)

    # -- the trade's end ------------------------------------------------------------------
    async def attach_all(self, client_id: str, trades: list[Trade]) -> list[Trade]:
        """The trades of a page with their settlements (one read)."""
        if not trades:
            return trades
        async with self._storage.read() as unit:
            found = await unit.settlements.of_trades(client_id, [t.trade_id for t in trades])
        if not found:
            return trades
        return [
            replace(t, settlement=found[t.trade_id]) if t.trade_id in found else t for t in trades
        ]

    async def follow(
        self,
        caller: Caller,
        trade: Trade,
        password: str | None = None,
        *,
        reopened: bool = False,
        known: Settlement | None = None,
    ) -> Trade:
        """Carry the trade's settlement on from what the trade is now (module rules); the
        trade with its settlement as it stands after. A transfer that cannot be made now
        leaves the settlement with its reason, never fails the request. `known`: the
        settlement as this request stored it (`reserve`): not read again."""
        settlement = known
        if settlement is None:
            async with self._storage.read() as unit:
                settlement = await unit.settlements.get(trade.client_id, trade.trade_id)
        if settlement is None:
            return trade
        try:
            settlement = await self._advance(caller, trade, settlement, password, reopened)
        except DomainError as exc:
            log.info("settlement of trade %s waits: %s", trade.trade_id, exc.message)
            async with self._storage.read() as unit:
                settlement = await unit.settlements.get(trade.client_id, trade.trade_id)
        return trade if settlement is None else replace(trade, settlement=settlement)

    async def collect(
        self, caller: Caller, trade: Trade, password: str, note: AuditNote | None = None
    ) -> Trade:
        """`/trade/collect`: the sell's coins moved to the desk now, with the password
        (checked first: the `/send` rules). A collection already sent or settled is
        answered as it stands; a sell still executing or that did not complete is a 409."""
        async with self._storage.read() as unit:
            settlement = await unit.settlements.get(trade.client_id, trade.trade_id)
        if settlement is None or settlement.side is not Side.SELL:
            raise NothingToCollect()
        if settlement.status is SettlementStatus.RELEASED:
            raise NothingToCollect("Nothing to collect: the sell did not complete")
        if (
            settlement.status is SettlementStatus.RESERVED
            and trade.status is not TradeStatus.COMPLETED
        ):
            raise NothingToCollect(
                "The sell has not completed yet: poll /trade, then collect once it is completed"
            )
        settlement = await self._advance(
            caller, trade, settlement, password, strict=True, note=note
        )
        return replace(trade, settlement=settlement)

    async def _advance(
        self,
        caller: Caller,
        trade: Trade,
        settlement: Settlement,
        password: str | None,
        reopened: bool = False,
        *,
        strict: bool = False,
        note: AuditNote | None = None,
    ) -> Settlement:
        """`note`: the request's own (`/trade/collect`), which the collection's signature
        is carried on; else the collection writes its entries under a note of its own."""
        status = settlement.status
        if status is SettlementStatus.RELEASED and trade.status is TradeStatus.COMPLETED:
            # released while a second approval of the reopened trade went through: the
            # trade traded after all, so its coins move
            status = SettlementStatus.RESERVED
        if status is SettlementStatus.RESERVED:
            lapsed = trade.status is TradeStatus.OPEN and (
                reopened or trade.lapses_unapproved(self._clock.now())
            )
            if trade.status in _UNFILLED or lapsed:
                released = settlement.moved(SettlementStatus.RELEASED, self._clock.now())
                return await self._move(caller, settlement, released)
            if trade.status is not TradeStatus.COMPLETED:
                return settlement
            settlement = await self._completed(caller, trade, settlement)
            status = settlement.status
        if status is SettlementStatus.SENT:  # its send's outcome, once the follow job has it
            return await self.check_sent(caller, settlement)
        if settlement.side is Side.BUY:
            # a delivery tried and refused waits for its time (`retry_seconds`), however
            # often the trade is read
            due = settlement.due_at is not None and settlement.due_at <= self._clock.now()
            if status is SettlementStatus.QUEUED or (status is SettlementStatus.SHORT and due):
                return await self._deliver(caller, settlement)
            retry = due and settlement.attempt < self.max_attempts
            if status is SettlementStatus.FAILED and retry:
                return await self._deliver(caller, settlement)
            return settlement
        waiting = status in (SettlementStatus.AWAITING_PASSWORD, SettlementStatus.FAILED)
        if waiting and password is not None:
            return await self._collect(caller, settlement, password, strict=strict, note=note)
        return settlement

    async def _completed(self, caller: Caller, trade: Trade, settlement: Settlement) -> Settlement:
        """reserved -> queued (a buy) or awaiting_password (a sell), for the amount the trade
        executed."""
        asset = self._policy.catalog.asset_by_id(trade.asset_id)
        units = _units(trade.figures.crypto_amount, asset)
        now = self._clock.now()
        if settlement.side is Side.BUY:
            new = settlement.moved(SettlementStatus.QUEUED, now, due_at=now, units=units)
        else:
            new = settlement.moved(
                SettlementStatus.AWAITING_PASSWORD,
                now,
                units=units,
                reason="The collection needs the wallet password: POST /trade/collect",
            )
        return await self._move(caller, settlement, new)

    # -- the jobs' run --------------------------------------------------------------------
    async def run(self, request_id: str, batch: int = 200) -> SettlementRun:
        """One run of the `settle_coins` job: every due settlement (walletcore.domain.
        settlement's `DUE_STATUSES`, `due_at` passed) carried on as far as it goes now:
        a reserved one whose trade ended, a delivery to make or retry, a sent transfer
        looked up. Each under the run's `request_id`, one at a time (a desk's transfers
        on one chain share its nonce lane)."""
        now = self._clock.now()
        async with self._storage.read() as unit:
            due = await unit.settlements.due(now, batch)
            clients = {c: await unit.clients.get(c) for c in {s.client_id for s in due}}
        report = SettlementRun(looked_at=len(due))
        for settlement in due:
            client = clients.get(settlement.client_id)
            if client is None:  # pragma: no cover - settlements outlive no client
                continue
            caller = Caller(client, request_id)
            try:
                after = await self._run_one(caller, settlement)
            except Exception as exc:  # noqa: BLE001 - one settlement's trouble is not the run's
                log.warning(
                    "settlement of trade %s: %s; looked at again later",
                    settlement.trade_id,
                    exc.message if isinstance(exc, DomainError) else type(exc).__name__,
                )
                await self._later(caller, settlement, settlement.reason or "")
                report.errors += 1
                continue
            if after.status is not settlement.status:
                report.moved += 1
        return report

    async def _run_one(self, caller: Caller, settlement: Settlement) -> Settlement:
        if settlement.status is SettlementStatus.SENT:
            return await self.check_sent(caller, settlement)
        async with self._storage.read() as unit:
            trade = await unit.trades.get(
                settlement.client_id, settlement.user_id, settlement.trade_id
            )
        if trade is None:  # pragma: no cover - a settlement is always some trade's
            return settlement
        before = settlement
        after = await self._advance(caller, trade, settlement, None)
        if after == before and after.status is SettlementStatus.RESERVED:
            # the trade is still in flight: looked at again on a later run
            return await self._later(caller, settlement, settlement.reason or "")
        return after

    # -- transfers ------------------------------------------------------------------------
    async def _deliver(self, caller: Caller, settlement: Settlement) -> Settlement:
        settlement = await self._next_attempt(caller, settlement)
        asset = self._policy.catalog.asset_by_id(settlement.asset_id)
        gateway = self._gateway(asset.chain)
        native = self._policy.catalog.native_asset(asset.chain)
        async with self._storage.read() as unit:
            pause = await unit.desk_pauses.get(caller.client_id, asset.id)
            desk = await platform_wallet_or_none(unit, caller.client_id)
            wallet = await user_wallet(unit, caller.client_id, settlement.user_id)
        if pause is not None:
            return await self._short(
                caller,
                settlement,
                f"Deliveries of {asset.symbol} are paused by the desk's reconciliation: "
                f"{pause.reason}; an operator resumes them",
            )
        if desk is None:
            return await self._short(
                caller,
                settlement,
                "The api client has no platform wallet to deliver from; the operator provisions it",
            )
        recipient = wallet.addresses.get(asset.chain)
        if recipient is None:
            return await self._short(
                caller,
                settlement,
                f"The wallet has no {asset.chain} address yet; add it with /extend",
            )
        request = SendRequest(
            "trade/delivery", settlement.user_id, asset, recipient, settlement.units
        )

        async def plan() -> Plan:
            ready = await plan_platform_send(request, gateway, native, desk)
            if not asset.is_native:  # the desk pays the fee in the chain's coin
                coin = await held(gateway, ready.transfer.sender, native)
                if coin < ready.fee.native_units:
                    raise InsufficientFunds(
                        f"Not enough {native.symbol} in the platform wallet for the network "
                        f"fee of {show(ready.fee.native_units, native)}: it holds "
                        f"{show(coin, native)}"
                    )
            return ready

        note = AuditNote(
            self._auditor,
            "trade.deliver",
            caller.request_id,
            caller.client_id,
            settlement.user_id,
            settlement.trade_id,
        )
        return await self._transfer(caller, settlement, request, plan, note)

    async def _collect(
        self,
        caller: Caller,
        settlement: Settlement,
        password: str,
        *,
        strict: bool,
        note: AuditNote | None = None,
    ) -> Settlement:
        asset = self._policy.catalog.asset_by_id(settlement.asset_id)
        gateway = self._gateway(asset.chain)
        native = self._policy.catalog.native_asset(asset.chain)
        async with self._storage.read() as unit:
            desk = await platform_wallet_or_none(unit, caller.client_id)
            wallet = await user_wallet(unit, caller.client_id, settlement.user_id)
        recipient = None if desk is None else desk.addresses.get(asset.chain)
        if desk is None or recipient is None:
            reason = "The api client has no platform wallet on this chain to collect to"
            moved = await self._wait(caller, settlement, reason)
            if strict:
                raise NothingToCollect(reason)
            return moved
        settlement = await self._next_attempt(caller, settlement)
        payer = caller.client.fee_payer_for(asset.id)
        request = SendRequest(
            "trade/collection", settlement.user_id, asset, recipient, settlement.units, password
        )

        async def plan() -> Plan:
            return await _plan_collection(request, payer, gateway, native, wallet, desk, recipient)

        if note is None:
            note = AuditNote(
                self._auditor,
                "trade.collect",
                caller.request_id,
                caller.client_id,
                settlement.user_id,
                settlement.trade_id,
            )
        try:
            return await self._transfer(caller, settlement, request, plan, note, strict=strict)
        except WrongWalletPassword:
            raise password_error_for(self._transfers().description(asset.chain)) from None

    async def _next_attempt(self, caller: Caller, settlement: Settlement) -> Settlement:
        """The settlement with the attempt its transfer goes under: a new one (a new key)
        only for the first transfer or after the previous one failed on chain."""
        if settlement.attempt and settlement.status is not SettlementStatus.FAILED:
            return settlement  # the same key: a transfer started and not failed resumes
        bumped = replace(settlement, attempt=settlement.attempt + 1, updated_at=self._clock.now())
        async with self._storage.write() as unit:
            if not await unit.settlements.move(settlement, bumped):
                raise IdempotencyConflict("The settlement is being moved by another request")
        return bumped

    async def _transfer(
        self,
        caller: Caller,
        settlement: Settlement,
        request: SendRequest,
        plan: Callable[[], Awaitable[Plan]],
        note: AuditNote,
        *,
        strict: bool = False,
    ) -> Settlement:
        key = settlement.request_id
        assert key is not None
        try:
            receipt = await self._sends().transfer(caller, key, request, plan, note)
        except WrongWalletPassword:
            raise
        except AwaitingApproval as held:  # the withdrawal policy holds it: tried again later
            if settlement.side is Side.BUY:
                return await self._short(caller, settlement, held.message)
            return await self._wait(caller, settlement, held.message)
        except DomainError as exc:
            if exc.status == 401 or (strict and exc.status < 500 and exc.status != 409):
                if settlement.side is Side.SELL and exc.status != 401:
                    await self._wait(caller, settlement, exc.message)
                raise
            if exc.status < 500 and exc.status != 409:
                if settlement.side is Side.BUY:
                    return await self._short(caller, settlement, exc.message)
                return await self._wait(caller, settlement, exc.message)
            log.warning(
                "%s of trade %s did not finish (%s): tried again",
                request.endpoint,
                settlement.trade_id,
                exc.status,
            )
            return await self._later(caller, settlement, exc.message)
        now = self._clock.now()
        if receipt.status == "failed":
            retried = settlement.side is Side.BUY and settlement.attempt < self.max_attempts
            failed = settlement.moved(
                SettlementStatus.FAILED,
                now,
                tx_hash=receipt.tx_hash,
                reason="The transfer failed on chain; nothing moved",
                due_at=now + self._retry if retried else None,
            )
            return await self._move(caller, settlement, failed)
        sent = settlement.moved(
            SettlementStatus.SENT, now, tx_hash=receipt.tx_hash, due_at=now + self._follow
        )
        moved = await self._move(caller, settlement, sent)
        if receipt.status == "success":
            return await self.check_sent(caller, moved)
        return moved

    async def check_sent(self, caller: Caller, settlement: Settlement) -> Settlement:
        """sent -> settled or failed, from the send's record (followed on chain by the
        lifecycle jobs); unchanged while it is pending."""
        key = settlement.request_id
        if settlement.status is not SettlementStatus.SENT or key is None:
            return settlement
        async with self._storage.read() as unit:
            record = await unit.sends.get(caller.client_id, key)
        now = self._clock.now()
        outcome = transfer_outcome(record)
        if outcome is ChainStatus.SUCCESS:
            tx_hash = record.tx_hash if record is not None else None
            done = settlement.moved(SettlementStatus.SETTLED, now, tx_hash=tx_hash)
            return await self._move(caller, settlement, done)
        if outcome is ChainStatus.FAILED:
            retried = settlement.side is Side.BUY and settlement.attempt < self.max_attempts
            failed = settlement.moved(
                SettlementStatus.FAILED,
                now,
                reason="The transfer failed on chain; nothing moved"
                + ("" if settlement.side is Side.BUY else ": collect again with the password"),
                due_at=now + self._retry if retried else None,
            )
            return await self._move(caller, settlement, failed)
        if settlement.due_at is not None and settlement.due_at > now:
            return settlement  # looked at again when due: a read wrote nothing
        # still pending: its current transaction shown (a bumped or re-signed replacement)
        tx_hash = record.tx_hash if record is not None and record.tx_hash else settlement.tx_hash
        due = replace(settlement, due_at=now + self._follow, tx_hash=tx_hash)
        async with self._storage.write() as unit:
            await unit.settlements.move(settlement, due)
        return due

    async def _short(self, caller: Caller, settlement: Settlement, reason: str) -> Settlement:
        now = self._clock.now()
        short = settlement.moved(
            SettlementStatus.SHORT, now, reason=reason, due_at=now + self._retry
        )
        return await self._move(caller, settlement, short)

    async def _wait(self, caller: Caller, settlement: Settlement, reason: str) -> Settlement:
        """A sell's collection that could not be made: it waits for the next password."""
        status = (
            SettlementStatus.FAILED
            if settlement.status is SettlementStatus.FAILED
            else SettlementStatus.AWAITING_PASSWORD
        )
        waiting = settlement.moved(status, self._clock.now(), reason=reason)
        return await self._move(caller, settlement, waiting)

    async def _later(self, caller: Caller, settlement: Settlement, reason: str) -> Settlement:
        """A transfer whose outcome is unknown: left in its status, looked at again later
        under the same key (its signed bytes are broadcast again, never re-signed)."""
        now = self._clock.now()
        later = replace(settlement, reason=reason or None, updated_at=now, due_at=now + self._retry)
        async with self._storage.write() as unit:
            await unit.settlements.move(settlement, later)
        return later

    # -- moves ----------------------------------------------------------------------------
    async def _move(self, caller: Caller, current: Settlement, new: Settlement) -> Settlement:
        """`current` -> `new` with its entry and event; what is stored after (the winner's
        when another mover won)."""
        async with self._storage.write() as unit:
            if await self._move_in(unit, caller, current, new):
                return new
        async with self._storage.read() as unit:
            stored = await unit.settlements.get(current.client_id, current.trade_id)
        return stored if stored is not None else current

    async def _move_in(
        self, unit: UnitOfWork, caller: Caller, current: Settlement, new: Settlement
    ) -> bool:
        entry = self._entry(caller, current, new) if current.status is not new.status else None
        return await unit.settlements.move(current, new, entry=entry)

    def _entry(self, caller: Caller, current: Settlement | None, new: Settlement) -> AuditEntry:
        """The audit entry of a settlement's move, with its event."""
        if new.status is SettlementStatus.RESERVED:
            action = "trade.reserve"
        elif new.status is SettlementStatus.RELEASED:
            action = "trade.release"
        elif new.status is SettlementStatus.SENT:
            action = "trade.deliver" if new.side is Side.BUY else "trade.collect"
        else:
            action = "trade.settlement"
        before = "none" if current is None else current.status.value
        detail = f"{before} -> {new.status.value}"
        if new.tx_hash and new.status in (SettlementStatus.SENT, SettlementStatus.SETTLED):
            detail = f"{detail}: {new.tx_hash}"
        elif new.reason and new.status in (SettlementStatus.SHORT, SettlementStatus.FAILED):
            detail = f"{detail}: {new.reason}"
        return self._auditor.entry(
            action,
            caller.request_id,
            caller.client_id,
            user_id=new.user_id,
            target=new.trade_id,
            detail=detail,
            at=new.updated_at,
            event=self._event(new),
        )

    def _event(self, settlement: Settlement) -> EventNote | None:
        kind = _EVENTS.get(settlement.status)
        if kind is None:
            return None
        asset = self._policy.catalog.asset_by_id(settlement.asset_id)
        return EventNote(
            kind,
            {
                "tradeId": settlement.trade_id,
                "side": settlement.side.value,
                "assetId": asset.id,
                "symbol": asset.symbol,
                "amount": format_balance(settlement.units, asset.decimals),
                "status": settlement.status.value,
                "txHash": settlement.tx_hash,
                "reason": settlement.reason,
            },
        )


async def _plan_collection(
    request: SendRequest,
    payer: FeePayer,
    gateway: ChainGateway,
    native: Asset,
    wallet: WalletRecord,
    desk: WalletRecord,
    recipient: str,
) -> Plan:
    """A sell's collection: the desk receives the amount exactly; the fee follows the
    asset's fee payer (module rules)."""
    asset, units = request.asset, request.amount_units
    sender = wallet_address(wallet, asset)
    holding = await held(gateway, sender, asset)
    if payer is FeePayer.PLATFORM:
        quote = await sponsored_fee(gateway, asset, native, sender, recipient, units, recipient)
        if quote is not None:
            if holding < units:
                raise _short_of(holding, units, asset)
            transfer = Transfer(asset, sender, recipient, units, fee_payer=recipient)
            return Plan(gateway, transfer, quote, FeePayer.PLATFORM, wallet, desk)
    quote = await gateway.fee(sender, recipient, asset, units)
    needed = units + quote.native_units if asset.is_native else units
    if holding < needed:
        raise _short_of(holding, needed, asset)
    if not asset.is_native and await held(gateway, sender, native) < quote.native_units:
        raise InsufficientFunds(
            f"Not enough {native.symbol} in the wallet for the collection's network fee of "
            f"{show(quote.native_units, native)}"
        )
    transfer = Transfer(asset, sender, recipient, units, fee_payer=sender)
    return Plan(gateway, transfer, quote, FeePayer.USER, wallet)


def _short_of(holding: int, needed: int, asset: Asset) -> InsufficientFunds:
    return InsufficientFunds(
        f"The wallet holds {show(holding, asset)}, the collection needs {show(needed, asset)}"
    )


def transfer_outcome(record: SendRecord | None) -> ChainStatus | None:
    """A settlement transfer's outcome on chain: success, failed, or None (not yet)."""
    if record is None:
        return None
    if record.chain_status in (ChainStatus.SUCCESS, ChainStatus.FAILED):
        return record.chain_status
    if record.chain_status is None and record.is_finished:
        status = (record.result or {}).get("status")
        if status == "success":
            return ChainStatus.SUCCESS
        return ChainStatus.FAILED if status == "failed" or record.raw_tx is None else None
    return None


def _units(amount: Decimal | None, asset: Asset) -> int:
    if amount is None:  # a trade's crypto leg is always known once quoted
        raise InvalidRequest("The trade has no crypto amount")
    return to_base_units(amount, asset.decimals)


__all__ = [
    "NothingToCollect",
    "SettlementRun",
    "SettlementSettings",
    "Settlements",
    "transfer_outcome",
]
