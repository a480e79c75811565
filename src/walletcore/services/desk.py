"""The desk's accounting: what each api client's desk (its platform wallet) holds, owes and
is owed, per asset; where the ledger and the chain differ; the reconciliation that pauses
deliveries (docs/settlement.md, "The desk's accounting").

Figures, per client and asset (an asset with settlements, or an enabled one on a chain
where the desk has an address), in the asset's smallest units:
- `balance`: what the desk's address holds on chain (the gateway's `balance`); None when
  it could not be read (`balance_error` says why, never a node's URL);
- `owed`: buys not delivered yet: side buy in `reserved`, `queued`, `short`, `sent`, or
  `failed` with a next attempt due; `in_flight`: of it, the `sent` ones;
- `incoming`: sells not collected yet: side sell in `reserved`, `awaiting_password`,
  `sent`, `failed`.
Mismatches (walletcore.domain.desk), each with its trades:
- a delivery failed for good (its last attempt failed: no next attempt), a collection
  `failed`, a `sent` settlement whose send record is final `failed`, a settlement `sent`
  for longer than `sent_alert_seconds`;
- the desk short (`owed` over `balance`), a user's wallet short (what its sells hold,
  their fees included, over its balance on chain).
Reconciliation (`reconcile`, the `reconcile_desk` job), over every client:
- every difference is logged at WARNING with its trades; an entry `desk.mismatch` is
  written for a client only when its set of differences (`Mismatch.key`) changed since
  the last such entry, so a standing shortfall writes once;
- a shortfall counted without the transfers in flight (a chain may have taken them off the
  balance already, and counting them would pause on a transfer about to settle) over the
  asset's tolerance (`WALLETCORE_DESK_TOLERANCE`, 0 for an asset not listed) pauses the
  client's deliveries of the asset (`desk.pause`): each is `short` with the pause's reason
  instead of sent (walletcore.services.settlements) until the operator resumes them
  (`resume`, `desk.resume`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from decimal import Decimal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.desk import DeskPause, Mismatch, MismatchKind
from walletcore.domain.errors import (
    AddressUnknown,
    ApiClientNotFound,
    Conflict,
    DomainError,
    InvalidRequest,
)
from walletcore.domain.ids import is_id
from walletcore.domain.money import to_base_units
from walletcore.domain.sends import ChainStatus
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side
from walletcore.domain.wallet import WalletOwner
from walletcore.ports import ChainGateway, Clock, Storage, UnitOfWork
from walletcore.services.audit import Auditor
from walletcore.services.send_plan import show
from walletcore.services.settlements import transfer_outcome
from walletcore.services.wallet_access import platform_wallet_or_none

log = logging.getLogger("walletcore.desk")

S = SettlementStatus
#: The settlements the figures count: every one not final.
OPEN_STATUSES = frozenset({S.RESERVED, S.AWAITING_PASSWORD, S.QUEUED, S.SHORT, S.SENT, S.FAILED})
_OWED = frozenset({S.RESERVED, S.QUEUED, S.SHORT, S.SENT})
_INCOMING = frozenset({S.RESERVED, S.AWAITING_PASSWORD, S.SENT, S.FAILED})
#: At most this many open settlements of a client are counted per read.
OPEN_LIMIT = 10_000
#: The action of the reconciliation's entries.
MISMATCH_ACTION = "desk.mismatch"
#: The audit entries read to find each client's last `desk.mismatch`.
_AUDIT_WINDOW = 1000
_NO_DIFFERENCE = "no differences"
#: The trades an entry names per difference.
_TRADES_SHOWN = 20


class DeskSettings(BaseSettings):
    """`WALLETCORE_DESK_*` (docs/settlement.md, "The desk's accounting")."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_DESK_", extra="ignore")

    #: Asset id -> the shortfall (in the asset's units, a decimal string) the
    #: reconciliation lets stand before it pauses the asset's deliveries; 0 when not listed
    tolerance: dict[int, Decimal] = Field(default_factory=dict)
    #: A settlement `sent` for longer than this is reported
    sent_alert_seconds: float = Field(default=3600.0, gt=0)
    #: How long one balance read may take before it is reported unread
    balance_timeout_seconds: float = Field(default=15.0, gt=0)


@dataclass(frozen=True, slots=True)
class AssetAccount:
    """The desk's figures of one asset (module rules), in the asset's smallest units."""

    asset: Asset
    address: str | None
    balance: int | None
    balance_error: str | None
    owed: int
    in_flight: int
    incoming: int
    owed_trades: tuple[str, ...]
    incoming_trades: tuple[str, ...]
    pause: DeskPause | None
    mismatches: tuple[Mismatch, ...]
    #: the shortfall the tolerance is compared with: desk and wallets, in-flight left out
    certain_short: int = 0

    @property
    def short(self) -> int:
        """How much more the desk owes than it holds (0 when it holds enough, or unread)."""
        return 0 if self.balance is None else max(0, self.owed - self.balance)


@dataclass(frozen=True, slots=True)
class ClientDesk:
    client_id: str
    assets: tuple[AssetAccount, ...]
    pauses: tuple[DeskPause, ...]
    #: the client's newest settlements, each with its transfer (`Settlement.request_id`)
    recent: tuple[Settlement, ...]

    @property
    def mismatches(self) -> tuple[Mismatch, ...]:
        return tuple(m for a in self.assets for m in a.mismatches)


@dataclass(slots=True)
class _Ledger:
    """What one read of a client's storage found (for the figures)."""

    enabled: tuple[int, ...]
    desk_addresses: Mapping[Chain, str]
    open: list[Settlement]
    recent: list[Settlement]
    pauses: list[DeskPause]
    failed_sends: set[str] = field(default_factory=set)
    wallets: dict[str, Mapping[Chain, str]] = field(default_factory=dict)


class DeskAccounts:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        gateways: Callable[[], Mapping[Chain, ChainGateway]],
        catalog: Catalog,
        auditor: Auditor,
        *,
        tolerance: Mapping[int, Decimal] | None = None,
        sent_alert_seconds: float = 3600.0,
        balance_timeout_seconds: float = 15.0,
        max_attempts: int = 3,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._build_gateways = gateways
        self._catalog = catalog
        self._auditor = auditor
        self._tolerance = dict(tolerance or {})
        self._sent_alert = timedelta(seconds=sent_alert_seconds)
        self._timeout = balance_timeout_seconds
        self.max_attempts = max_attempts
        #: client id -> the keys of its differences, as its last `desk.mismatch` said
        self._known: dict[str, frozenset[str]] = {}

    def _owed(self, s: Settlement) -> bool:
        """A buy the desk still has to deliver: a failed one only while it is retried (a
        next attempt due, and attempts left)."""
        if s.status is S.FAILED:
            return s.due_at is not None and s.attempt < self.max_attempts
        return s.status in _OWED

    def tolerance_units(self, asset: Asset) -> int:
        return to_base_units(self._tolerance.get(asset.id, Decimal(0)), asset.decimals)

    # -- reading --------------------------------------------------------------------------
    async def show(
        self, client_id: str | None = None, asset_id: int | None = None, *, recent: int = 20
    ) -> list[ClientDesk]:
        """The desks of one client (404 when unknown) or of every client, of one asset (400
        when not served) or of all."""
        if asset_id is not None:
            self._asset(asset_id)
        if client_id is None:
            async with self._storage.read() as unit:
                clients = [c.client_id for c in await unit.clients.all()]
        else:
            _check_client_id(client_id)
            clients = [client_id]
        return [await self.of_client(c, asset_id, recent=recent) for c in clients]

    async def of_client(
        self, client_id: str, asset_id: int | None = None, *, recent: int = 20
    ) -> ClientDesk:
        async with self._storage.read() as unit:
            ledger = await self._read(unit, client_id, asset_id, recent)
        assets = self._assets(ledger, asset_id)
        wanted = {(a, ledger.desk_addresses.get(a.chain)) for a in assets}
        for user_id, held in _held_by_wallet(ledger.open).items():
            addresses = ledger.wallets.get(user_id, {})
            for asset in assets:
                if asset.id in held:
                    wanted.add((asset, addresses.get(asset.chain)))
        balances = await self._balances(wanted)
        accounts = tuple(self._account(a, ledger, balances) for a in assets)
        return ClientDesk(client_id, accounts, tuple(ledger.pauses), tuple(ledger.recent))

    async def _read(
        self, unit: UnitOfWork, client_id: str, asset_id: int | None, recent: int
    ) -> _Ledger:
        client = await unit.clients.get(client_id)
        if client is None:
            raise ApiClientNotFound()
        desk = await platform_wallet_or_none(unit, client_id)
        listing = unit.settlements.listing
        ledger = _Ledger(
            enabled=tuple(client.enabled_assets),
            desk_addresses={} if desk is None else dict(desk.addresses),
            open=await listing(client_id, statuses=OPEN_STATUSES, limit=OPEN_LIMIT),
            recent=await listing(client_id, asset_id=asset_id, limit=recent) if recent else [],
            pauses=await unit.desk_pauses.of_client(client_id),
        )
        for settlement in ledger.open:
            key = settlement.request_id
            if settlement.status is S.SENT and key is not None:
                record = await unit.sends.get(client_id, key)
                if transfer_outcome(record) is ChainStatus.FAILED:
                    ledger.failed_sends.add(settlement.trade_id)
        for user_id in _held_by_wallet(ledger.open):
            wallet = await unit.wallets.get(client_id, WalletOwner.USER, user_id)
            ledger.wallets[user_id] = {} if wallet is None else dict(wallet.addresses)
        return ledger

    def _assets(self, ledger: _Ledger, asset_id: int | None) -> list[Asset]:
        """The assets shown: those with settlements, and the enabled ones on a chain where
        the desk has an address."""
        ids = {s.asset_id for s in [*ledger.open, *ledger.recent]}
        ids.update(p.asset_id for p in ledger.pauses)
        ids.update(
            a
            for a in ledger.enabled
            if a in self._catalog and self._catalog.asset_by_id(a).chain in ledger.desk_addresses
        )
        if asset_id is not None:
            ids &= {asset_id}
        return [self._catalog.asset_by_id(a) for a in sorted(ids) if a in self._catalog]

    async def _balances(
        self, wanted: Iterable[tuple[Asset, str | None]]
    ) -> dict[tuple[int, str], int | str]:
        """(asset id, address) -> its balance on chain, or why it could not be read."""
        gateways = self._build_gateways()
        reads = [(a, address) for a, address in wanted if address is not None]
        found = await asyncio.gather(*(self._balance(gateways, a, x) for a, x in reads))
        return {(a.id, x): value for (a, x), value in zip(reads, found, strict=True)}

    async def _balance(
        self, gateways: Mapping[Chain, ChainGateway], asset: Asset, address: str
    ) -> int | str:
        gateway = gateways.get(asset.chain)
        if gateway is None:
            return f"no gateway for {asset.chain} here"
        try:
            async with asyncio.timeout(self._timeout):
                return await gateway.balance(address, asset)
        except AddressUnknown:  # an indexer knows no address without transactions
            return 0
        except DomainError as exc:
            return exc.message
        except TimeoutError:
            return f"the node did not answer within {self._timeout:g} s"
        except Exception as exc:  # noqa: BLE001 - one node, whatever its driver raises
            # the type only: a driver's message may hold the node's URL, a secret
            return f"the node could not be read ({type(exc).__name__})"

    def _account(
        self, asset: Asset, ledger: _Ledger, balances: Mapping[tuple[int, str], int | str]
    ) -> AssetAccount:
        mine = [s for s in ledger.open if s.asset_id == asset.id]
        owed = [s for s in mine if s.side is Side.BUY and self._owed(s)]
        incoming = [s for s in mine if s.side is Side.SELL and s.status in _INCOMING]
        sent = [s for s in owed if s.status is S.SENT]
        address = ledger.desk_addresses.get(asset.chain)
        read = None if address is None else balances.get((asset.id, address))
        balance = read if isinstance(read, int) else None
        error = read if isinstance(read, str) else None
        if address is None:
            error = f"the desk has no {asset.chain} address"
        mismatches = [*self._status_mismatches(mine, ledger.failed_sends)]
        owed_units, sent_units = _sum(owed), _sum(sent)
        certain = 0
        if balance is not None and owed_units > balance:
            mismatches.append(
                Mismatch(
                    MismatchKind.DESK_SHORT,
                    asset.id,
                    _ids(owed),
                    f"the desk holds {show(balance, asset)} and owes {show(owed_units, asset)} "
                    f"to deliveries ({show(sent_units, asset)} of it in flight)",
                    owed_units - balance,
                )
            )
            # A desk short of inventory is reported, never paused for: its deliveries are
            # `short` and go once it is topped up. What pauses is coins missing where the
            # ledger says they are (a wallet holding less than its sells hold).
        for shortfall, sure in self._wallet_shortfalls(asset, ledger, balances):
            mismatches.append(shortfall)
            certain += sure
        pause = next((p for p in ledger.pauses if p.asset_id == asset.id), None)
        return AssetAccount(
            asset=asset,
            address=address,
            balance=balance,
            balance_error=error,
            owed=owed_units,
            in_flight=sent_units,
            incoming=_sum(incoming),
            owed_trades=_ids(owed),
            incoming_trades=_ids(incoming),
            pause=pause,
            mismatches=tuple(mismatches),
            certain_short=certain,
        )

    def _status_mismatches(
        self, settlements: Iterable[Settlement], failed_sends: set[str]
    ) -> Iterable[Mismatch]:
        now = self._clock.now()
        for s in settlements:
            kind: MismatchKind | None = None
            if s.status is S.FAILED and s.side is Side.BUY and not self._owed(s):
                kind, detail = MismatchKind.DELIVERY_FAILED, "the delivery's last attempt failed"
            elif s.status is S.FAILED and s.side is Side.SELL:
                kind, detail = MismatchKind.COLLECTION_FAILED, "the collection failed on chain"
            elif s.trade_id in failed_sends:
                kind, detail = MismatchKind.TRANSFER_FAILED, "sent, and its transfer failed"
            elif s.status is S.SENT and now - s.updated_at > self._sent_alert:
                minutes = (now - s.updated_at).total_seconds() / 60
                kind, detail = MismatchKind.SENT_TOO_LONG, f"sent {minutes:.0f} minutes ago"
            if kind is not None:
                detail = f"{detail} (attempt {s.attempt}, tx {s.tx_hash or 'none'})"
                yield Mismatch(kind, s.asset_id, (s.trade_id,), detail)

    def _wallet_shortfalls(
        self, asset: Asset, ledger: _Ledger, balances: Mapping[tuple[int, str], int | str]
    ) -> Iterable[tuple[Mismatch, int]]:
        """Each user's wallet whose sells hold more of `asset` than it holds on chain, and
        the part of that shortfall left when its collections in flight are left out."""
        for user_id, held in _held_by_wallet(ledger.open).items():
            address = ledger.wallets.get(user_id, {}).get(asset.chain)
            if asset.id not in held or address is None:
                continue
            total, in_flight, trades = held[asset.id]
            read = balances.get((asset.id, address))
            if not isinstance(read, int) or total <= read:
                continue
            yield (
                Mismatch(
                    MismatchKind.WALLET_SHORT,
                    asset.id,
                    tuple(sorted(trades)),
                    f"a wallet holds {show(read, asset)}, its sells hold {show(total, asset)}",
                    total - read,
                    user_id=user_id,
                ),
                max(0, total - in_flight - read),
            )

    def _asset(self, asset_id: int) -> Asset:
        asset = self._catalog.get(asset_id)
        if asset is None:
            raise InvalidRequest(f"Asset {asset_id} is not served here")
        return asset

    # -- the reconciliation ---------------------------------------------------------------
    async def reconcile(self, request_id: str) -> list[ClientDesk]:
        """One run of the `reconcile_desk` job (module rules): every client's desk, its
        differences reported, its assets short over their tolerance paused."""
        async with self._storage.read() as unit:
            clients = [c.client_id for c in await unit.clients.all()]
            await self._recall(unit)
        desks = []
        for client_id in clients:
            try:
                desk = await self.of_client(client_id, recent=0)
                desk = await self._pause_over_tolerance(desk, request_id)
                await self._report(desk, request_id)
            except Exception as exc:  # noqa: BLE001 - one client's trouble is not the run's
                reason = exc.message if isinstance(exc, DomainError) else type(exc).__name__
                log.warning("desk of %s not reconciled: %s", client_id, reason)
                continue
            desks.append(desk)
        return desks

    async def _recall(self, unit: UnitOfWork) -> None:
        """Each client's differences as its newest `desk.mismatch` entry states them (the
        entry of another process's run counts too)."""
        seen: set[str] = set()
        for entry in await unit.audit.newest(_AUDIT_WINDOW):
            if entry.action != MISMATCH_ACTION or entry.client_id is None:
                continue
            if entry.client_id in seen:
                continue
            seen.add(entry.client_id)
            self._known[entry.client_id] = _keys_of(entry.detail or "")

    async def _pause_over_tolerance(self, desk: ClientDesk, request_id: str) -> ClientDesk:
        accounts = []
        pauses = {p.asset_id: p for p in desk.pauses}
        for account in desk.assets:
            asset = account.asset
            tolerance = self.tolerance_units(asset)
            if account.pause is None and account.certain_short > tolerance:
                reason = (
                    f"{show(account.certain_short, asset)} missing on chain against the "
                    f"ledger, over the tolerance of {show(tolerance, asset)}"
                )
                pause, _ = await self._pause(desk.client_id, asset, reason, request_id)
                log.warning(
                    "desk of %s: deliveries of %s paused: %s", desk.client_id, asset.symbol, reason
                )
                pauses[asset.id] = pause
                account = replace(account, pause=pause)
            accounts.append(account)
        ordered = tuple(pauses[a] for a in sorted(pauses))
        return replace(desk, assets=tuple(accounts), pauses=ordered)

    async def _report(self, desk: ClientDesk, request_id: str) -> None:
        mismatches = sorted(desk.mismatches, key=lambda m: m.key)
        for m in mismatches:
            symbol = self._catalog.asset_by_id(m.asset_id).symbol
            log.warning(
                "desk of %s: %s %s: %s (trades %s)",
                desk.client_id,
                m.kind.value,
                symbol,
                m.detail,
                ", ".join(m.trade_ids) or "none",
            )
        keys = frozenset(m.key for m in mismatches)
        if keys == self._known.get(desk.client_id, frozenset()):
            return
        detail = " | ".join(_described(m) for m in mismatches) or _NO_DIFFERENCE
        entry = self._auditor.entry(
            MISMATCH_ACTION, request_id, desk.client_id, target=str(len(keys)), detail=detail
        )
        async with self._storage.write() as unit:
            await unit.audit.append(entry)
        self._known[desk.client_id] = keys

    # -- the operator ---------------------------------------------------------------------
    async def pause(
        self, client_id: str, asset_id: int, reason: str | None, request_id: str = "operator"
    ) -> DeskPause:
        """Pause the client's deliveries of the asset by hand (`desk.pause`); a standing
        pause is kept and answered (`replay`)."""
        async with self._auditor.record(
            "desk.pause", request_id, _audit_id(client_id), target=str(asset_id)
        ) as note:
            _check_client_id(client_id)
            asset = self._asset(asset_id)
            text = " ".join((reason or "").split()) or "paused by the operator"
            if len(text) > 300:
                raise InvalidRequest("The reason is longer than 300 characters")
            pause, entry = await self._pause(client_id, asset, text, request_id)
            if entry is not None:
                note.carried(entry)
            return pause

    async def _pause(
        self, client_id: str, asset: Asset, reason: str, request_id: str
    ) -> tuple[DeskPause, AuditEntry | None]:
        """The pause stored with its entry; the standing one (and no entry) when there is
        one."""
        pause = DeskPause(client_id, asset.id, reason, self._clock.now())
        entry = self._auditor.entry(
            "desk.pause",
            request_id,
            client_id,
            target=str(asset.id),
            detail=f"{asset.symbol}: {reason}",
            at=pause.paused_at,
        )
        async with self._storage.write() as unit:
            if await unit.clients.get(client_id) is None:
                raise ApiClientNotFound()
            if await unit.desk_pauses.pause(pause, entry=entry):
                return pause, entry
            standing = await unit.desk_pauses.get(client_id, asset.id)
        assert standing is not None  # the insert lost to it, in this very unit
        return standing, None

    async def resume(
        self, client_id: str, asset_id: int, request_id: str = "operator"
    ) -> DeskPause:
        """Deliveries of the asset go again (`desk.resume`); the pause removed. A 409 when
        they were not paused."""
        async with self._auditor.record(
            "desk.resume", request_id, _audit_id(client_id), target=str(asset_id)
        ) as note:
            _check_client_id(client_id)
            asset = self._asset(asset_id)
            async with self._storage.write() as unit:
                standing = await unit.desk_pauses.get(client_id, asset.id)
                if standing is None:
                    raise Conflict(f"Deliveries of {asset.symbol} are not paused for this client")
                entry = note.entry(detail=f"{asset.symbol}: was paused: {standing.reason}")
                await unit.desk_pauses.resume(client_id, asset.id, entry=entry)
            note.carried(entry)
            return standing


def _sum(settlements: Iterable[Settlement]) -> int:
    return sum(s.units for s in settlements)


def _ids(settlements: Iterable[Settlement]) -> tuple[str, ...]:
    return tuple(sorted(s.trade_id for s in settlements))


def _held_by_wallet(
    settlements: Iterable[Settlement],
) -> dict[str, dict[int, tuple[int, int, set[str]]]]:
    """user id -> asset id -> (what the user's sells hold of it, coins and fees; the part
    of that in collections in flight; those sells), as `SettlementStore.held` counts."""
    found: dict[str, dict[int, tuple[int, int, set[str]]]] = defaultdict(dict)
    for s in settlements:
        if s.side is not Side.SELL or not s.status.holds:
            continue
        parts = [(s.asset_id, s.units)]
        if s.fee_asset_id is not None and s.fee_units:
            parts.append((s.fee_asset_id, s.fee_units))
        for asset_id, units in parts:
            total, in_flight, trades = found[s.user_id].get(asset_id, (0, 0, set()))
            sent = units if s.status is S.SENT else 0
            found[s.user_id][asset_id] = (total + units, in_flight + sent, trades | {s.trade_id})
    return dict(found)


def _described(mismatch: Mismatch) -> str:
    """One difference in a `desk.mismatch` entry: its key first (read back by `_keys_of`),
    then what it is and its trades (the first `_TRADES_SHOWN`)."""
    ids = mismatch.trade_ids
    trades = ", ".join(ids[:_TRADES_SHOWN]) or "none"
    if len(ids) > _TRADES_SHOWN:
        trades += f" and {len(ids) - _TRADES_SHOWN} more"
    return f"{mismatch.key} ({mismatch.detail}; trades {trades})"


def _keys_of(detail: str) -> frozenset[str]:
    if detail == _NO_DIFFERENCE:
        return frozenset()
    return frozenset(part.split(" ", 1)[0] for part in detail.split(" | ") if part)


def _check_client_id(client_id: str) -> None:
    if not is_id(client_id):
        raise ApiClientNotFound()


def _audit_id(client_id: str) -> str | None:
    """Only a well-formed id reaches the audit log."""
    return client_id if is_id(client_id) else None


__all__ = [
    "MISMATCH_ACTION",
    "OPEN_STATUSES",
    "AssetAccount",
    "ClientDesk",
    "DeskAccounts",
    "DeskSettings",
]
