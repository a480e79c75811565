"""Rows <-> domain dataclasses, explicitly, in both directions (no ORM mapping)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from operator import attrgetter
from typing import Any, TypeVar

from walletcore.domain.assets import Chain, FeePayer, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, AuthFailures, User
from walletcore.domain.deposits import BlockRef, Deposit, DepositStatus, ScanCursor, Watched
from walletcore.domain.desk import DeskPause
from walletcore.domain.events import Event, EventNote, EventPosition
from walletcore.domain.policies import (
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Destination,
    Operator,
    Origin,
    Policy,
    PolicyVersion,
    Transfer,
    Usage,
    WalletKind,
)
from walletcore.domain.sends import ChainStatus, SendRecord, SendState, Spend
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import (
    TERMINAL_STATUSES,
    Figures,
    FixedLeg,
    Quote,
    Side,
    Trade,
    TradeStatus,
)
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.domain.webhooks import (
    AttemptResult,
    DeliveryAttempt,
    DeliveryError,
    WebhookEndpoint,
)

Row = Mapping[Any, Any]  # a RowMapping: column name -> value
E = TypeVar("E", bound=Enum)


# api clients ----------------------------------------------------------------------------
def client_values(client: ApiClient) -> dict[str, Any]:
    return {
        "client_id": client.client_id,
        "name": client.name,
        "key_hash": client.key_hash,
        "enabled_assets": list(client.enabled_assets),
        "fee_payer": client.fee_payer.value,
        "asset_fee_payers": {str(k): v.value for k, v in client.asset_fee_payers.items()},
        "disabled": client.disabled,
        "key_generation": client.key_generation,
        "created_at": client.created_at,
        **auth_failures_values(client.auth_failures),
    }


#: The columns only `/auth` changes (`SqlClients.add_auth_failures`): an update leaves them.
CLIENT_AUTH_COLUMNS = ("auth_failures", "auth_failures_since", "auth_failed_at")


def auth_failures_values(failures: AuthFailures) -> dict[str, Any]:
    return {
        "auth_failures": failures.count,
        "auth_failures_since": failures.since,
        "auth_failed_at": failures.last_at,
    }


def auth_failures_from(row: Row) -> AuthFailures:
    return AuthFailures(
        int(row["auth_failures"]), row["auth_failures_since"], row["auth_failed_at"]
    )


def client_from(row: Row) -> ApiClient:
    return ApiClient(
        client_id=row["client_id"],
        name=row["name"],
        key_hash=row["key_hash"],
        enabled_assets=tuple(int(a) for a in row["enabled_assets"]),
        fee_payer=FeePayer(row["fee_payer"]),
        asset_fee_payers={int(k): FeePayer(v) for k, v in row["asset_fee_payers"].items()},
        disabled=bool(row["disabled"]),
        key_generation=int(row["key_generation"]),
        created_at=row["created_at"],
        auth_failures=auth_failures_from(row),
    )


# users and wallets ----------------------------------------------------------------------
def user_values(user: User, request_id: str | None = None) -> dict[str, Any]:
    """`request_id`: the X-Request-Id of the /create that made the user, if one was sent."""
    return {
        "client_id": user.client_id,
        "user_id": user.user_id,
        "created_at": user.created_at,
        "request_id": request_id,
    }


def user_from(row: Row) -> User:
    return User(user_id=row["user_id"], client_id=row["client_id"], created_at=row["created_at"])


def wallet_values(wallet: WalletRecord) -> dict[str, Any]:
    return {
        "client_id": wallet.client_id,
        "owner": wallet.owner.value,
        "user_id": wallet.user_id,
        "sealed": bytes(wallet.sealed),
        "addresses": {Chain(c).value: a for c, a in wallet.addresses.items()},
        "created_at": wallet.created_at,
        "updated_at": wallet.updated_at,
    }


def wallet_from(row: Row) -> WalletRecord:
    return WalletRecord(
        client_id=row["client_id"],
        owner=WalletOwner(row["owner"]),
        user_id=row["user_id"],
        sealed=bytes(row["sealed"]),
        addresses={Chain(c): a for c, a in row["addresses"].items()},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


# trades ---------------------------------------------------------------------------------
#: The columns a quote writes once and a move never changes, in `trade_row`'s order (the
#: moved ones, `TRADE_MOVE_COLUMNS`, follow them there).
TRADE_QUOTE_COLUMNS = (
    "trade_id",
    "client_id",
    "user_id",
    "side",
    "asset_id",
    "symbol",
    "fiat",
    "fixed_leg",
    "quote_crypto_amount",
    "quote_fiat_amount",
    "quote_price",
    "quote_expires_at",
    "created_at",
)


def trade_row(trade: Trade) -> tuple[Any, ...]:
    """Every column of `trade`'s row, in `TRADE_COLUMNS` order: what a quote's insert
    binds (`trade_values`; the audited insert's binds, `stores`)."""
    quote = trade.quote
    return (
        trade.trade_id,
        trade.client_id,
        trade.user_id,
        trade.side._value_,
        trade.asset_id,
        trade.symbol,
        trade.fiat._value_,
        trade.fixed_leg._value_,
        quote.crypto_amount,
        quote.fiat_amount,
        quote.price,
        quote.expires_at,
        trade.created_at,
        *trade_move_row(trade),
    )


def trade_values(trade: Trade) -> dict[str, Any]:
    return dict(zip(TRADE_COLUMNS, trade_row(trade), strict=True))


#: What a move of a trade can change (`Trade.start_approval`, `settle`, `accept`, `fail`,
#: `reopen`, `expire`, `cancel`). The rest of a row (its ids, side, asset, fiat, fixed leg,
#: quote and creation instant) is written once, by the quote, and never again.
TRADE_MOVE_COLUMNS = (
    "status",
    "approved_crypto_amount",
    "approved_fiat_amount",
    "approved_price",
    "executed_crypto_amount",
    "executed_fiat_amount",
    "executed_price",
    "reference",
    "failure_reason",
    "approved_at",
    "completed_at",
)
#: Every column of a trade's row, in `trade_row`'s order.
TRADE_COLUMNS = TRADE_QUOTE_COLUMNS + TRADE_MOVE_COLUMNS


def trade_move_row(trade: Trade) -> tuple[Any, ...]:
    """The values of `TRADE_MOVE_COLUMNS` for `trade`, in that order: what each move's
    statement binds (`trade_move_values`; the audited move's binds, `stores`)."""
    approved, executed = trade.approved, trade.executed
    return (
        trade.status._value_,
        None if approved is None else approved.crypto_amount,
        None if approved is None else approved.fiat_amount,
        None if approved is None else approved.price,
        None if executed is None else executed.crypto_amount,
        None if executed is None else executed.fiat_amount,
        None if executed is None else executed.price,
        trade.reference,
        trade.failure_reason,
        trade.approved_at,
        trade.completed_at,
    )


def trade_move_values(trade: Trade) -> dict[str, Any]:
    """The columns of `TRADE_MOVE_COLUMNS` for `trade` (a part of `trade_values`)."""
    return dict(zip(TRADE_MOVE_COLUMNS, trade_move_row(trade), strict=True))


#: The enums of a trade row by stored value: a dict lookup, not an enum call per column
#: (`TradeStatus(value)` is ~1 us: four of them were a quarter of building a trade).
_MEMBERS: dict[type[Enum], dict[Any, Any]] = {
    kind: {member.value: member for member in kind} for kind in (Side, Fiat, FixedLeg, TradeStatus)
}
#: Terminal trades each `TradeRows` keeps built (under 2 KB each, with the values they hold).
TERMINAL_TRADES_SIZE = 10_000


def trade_from(row: Row) -> Trade:
    return _trade(row, _enum(TradeStatus, row["status"]))


def _enum(kind: type[E], value: Any) -> E:
    try:
        member: E = _MEMBERS[kind][value]
    except KeyError:
        return kind(value)  # raises ValueError, as the enum call did
    return member


def _trade(row: Row, status: TradeStatus) -> Trade:
    return Trade(
        trade_id=row["trade_id"],
        client_id=row["client_id"],
        user_id=row["user_id"],
        side=_enum(Side, row["side"]),
        asset_id=int(row["asset_id"]),
        symbol=row["symbol"],
        fiat=_enum(Fiat, row["fiat"]),
        fixed_leg=_enum(FixedLeg, row["fixed_leg"]),
        quote=Quote(
            crypto_amount=row["quote_crypto_amount"],
            fiat_amount=row["quote_fiat_amount"],
            price=row["quote_price"],
            expires_at=row["quote_expires_at"],
        ),
        status=status,
        created_at=row["created_at"],
        approved_at=row["approved_at"],
        completed_at=row["completed_at"],
        approved=_figures_from("approved", row),
        executed=_figures_from("executed", row),
        reference=row["reference"],
        failure_reason=row["failure_reason"],
    )


class TradeRows:
    """Trades from their rows, a terminal trade built once per database (one per
    `SqlStorage`, so two databases in one process never share one).

    A completed, failed, expired or cancelled trade never changes again: the domain moves a trade
    only out of `open`, `approved` and `executing`, and every store writes a move as a
    compare-and-set on the stored status (the reason `Services.trade_view` formats one once). Its
    row is still read every time, and the trade built from it is reused when the row is the one it
    was built from (same trade, owner, status and completion instant): building one was ~16 us, and
    a page of ten completed trades went from 553 to 423 us of CPU (docs/performance.md, "Caches, and
    why each is safe"). A trade in any other status is built every time. The oldest go past
    `TERMINAL_TRADES_SIZE`."""

    __slots__ = ("_known", "_size")

    def __init__(self, size: int = TERMINAL_TRADES_SIZE) -> None:
        self._known: dict[str, Trade] = {}
        self._size = size

    def __call__(self, row: Row) -> Trade:
        status = _enum(TradeStatus, row["status"])
        if status not in TERMINAL_STATUSES:
            return _trade(row, status)
        known = self._known.get(row["trade_id"])
        if (
            known is not None
            and known.status is status
            and known.completed_at == row["completed_at"]
            and known.client_id == row["client_id"]
            and known.user_id == row["user_id"]
        ):
            return known
        trade = _trade(row, status)
        known_trades = self._known
        known_trades.pop(trade.trade_id, None)  # (re)inserted as the newest
        known_trades[trade.trade_id] = trade
        if len(known_trades) > self._size:
            del known_trades[next(iter(known_trades))]
        return trade


def _figures_from(prefix: str, row: Row) -> Figures | None:
    price = row[f"{prefix}_price"]  # a price is always present when the figures are
    if price is None:
        return None
    return Figures(row[f"{prefix}_crypto_amount"], row[f"{prefix}_fiat_amount"], price)


# sends ----------------------------------------------------------------------------------
def send_values(record: SendRecord) -> dict[str, Any]:
    return {
        "client_id": record.client_id,
        "request_id": record.request_id,
        "fingerprint": record.fingerprint,
        "state": record.state.value,
        "attempt": record.attempt,
        "locked_until": record.locked_until,
        "tx_hash": record.tx_hash,
        "raw_tx": None if record.raw_tx is None else bytes(record.raw_tx),
        "result": None if record.result is None else dict(record.result),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "chain_status": None if record.chain_status is None else record.chain_status.value,
        "chain_checked_at": record.chain_checked_at,
        "chain_final_at": record.chain_final_at,
        **spend_values(record.spend),
    }


def spend_values(spend: Spend | None) -> dict[str, Any]:
    """The `spend_*` columns of a send record (all NULL: no spend)."""
    if spend is None:
        return {"spend_user_id": None, "spend_asset_id": None, "spend_units": None}
    return {
        "spend_user_id": spend.user_id,
        "spend_asset_id": spend.asset_id,
        "spend_units": spend.units,
    }


def spend_from(row: Row) -> Spend | None:
    user_id = row["spend_user_id"]
    if user_id is None:
        return None
    return Spend(user_id, int(row["spend_asset_id"]), int(row["spend_units"]))


def send_from(row: Row) -> SendRecord:
    raw, chain = row["raw_tx"], row["chain_status"]
    return SendRecord(
        client_id=row["client_id"],
        request_id=row["request_id"],
        fingerprint=row["fingerprint"],
        state=SendState(row["state"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        locked_until=row["locked_until"],
        attempt=int(row["attempt"]),
        tx_hash=row["tx_hash"],
        raw_tx=None if raw is None else bytes(raw),
        result=row["result"],
        chain_status=None if chain is None else ChainStatus(chain),
        chain_checked_at=row["chain_checked_at"],
        chain_final_at=row["chain_final_at"],
        spend=spend_from(row),
    )


# settlements ----------------------------------------------------------------------------
def settlement_move_values(settlement: Settlement) -> dict[str, Any]:
    """What a move of a settlement writes (`Settlement.moved`): its status, attempt, units,
    transaction, reason and times. The rest (its keys, user, side, asset, fee and
    creation instant) is written once, by `add`."""
    return {
        "status": settlement.status.value,
        "attempt": settlement.attempt,
        "units": settlement.units,
        "tx_hash": settlement.tx_hash,
        "reason": settlement.reason,
        "due_at": settlement.due_at,
        "updated_at": settlement.updated_at,
    }


def settlement_values(settlement: Settlement) -> dict[str, Any]:
    return {
        "client_id": settlement.client_id,
        "trade_id": settlement.trade_id,
        "user_id": settlement.user_id,
        "side": settlement.side.value,
        "asset_id": settlement.asset_id,
        "fee_units": settlement.fee_units,
        "fee_asset_id": settlement.fee_asset_id,
        "created_at": settlement.created_at,
        **settlement_move_values(settlement),
    }


def settlement_from(row: Row) -> Settlement:
    fee_asset = row["fee_asset_id"]
    return Settlement(
        trade_id=row["trade_id"],
        client_id=row["client_id"],
        user_id=row["user_id"],
        side=Side(row["side"]),
        asset_id=int(row["asset_id"]),
        units=int(row["units"]),
        status=SettlementStatus(row["status"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        fee_units=int(row["fee_units"]),
        fee_asset_id=None if fee_asset is None else int(fee_asset),
        attempt=int(row["attempt"]),
        tx_hash=row["tx_hash"],
        reason=row["reason"],
        due_at=row["due_at"],
    )


# audit ----------------------------------------------------------------------------------
#: The columns of an audit entry a store writes, in `audit_row`'s order.
AUDIT_COLUMNS = (
    "at",
    "client_id",
    "action",
    "request_id",
    "outcome",
    "user_id",
    "target",
    "detail",
)


#: The values of `AUDIT_COLUMNS` for an entry, in that order (an entry's fields have the
#: columns' names): `audit_row(entry)`.
audit_row: Callable[[AuditEntry], tuple[Any, ...]] = attrgetter(*AUDIT_COLUMNS)


def audit_values(entry: AuditEntry) -> dict[str, Any]:
    return dict(zip(AUDIT_COLUMNS, audit_row(entry), strict=True))


def audit_from(row: Row) -> AuditEntry:
    return AuditEntry(
        at=row["at"],
        client_id=row["client_id"],
        action=row["action"],
        request_id=row["request_id"],
        outcome=row["outcome"],
        user_id=row["user_id"],
        target=row["target"],
        detail=row["detail"],
    )


# the event feed ---------------------------------------------------------------------------
#: The columns an event's insert writes, in `event_row`'s order (`seq` and `tx` are the
#: database's: the row's number and the writing transaction).
EVENT_COLUMNS = ("client_id", "user_id", "type", "at", "data")


def event_row(
    client_id: str, user_id: str | None, note: EventNote, at: datetime
) -> tuple[Any, ...]:
    """The values of `EVENT_COLUMNS` for `note`, published at `at`, in that order."""
    return (client_id, user_id, note.type._value_, at, dict(note.data))


def event_values(
    client_id: str, user_id: str | None, note: EventNote, at: datetime
) -> dict[str, Any]:
    return dict(zip(EVENT_COLUMNS, event_row(client_id, user_id, note, at), strict=True))


def entry_event_values(entry: AuditEntry) -> dict[str, Any] | None:
    """The event row an audit entry carries (its client, user and time), or None."""
    note = entry.event
    if note is None:
        return None
    if entry.client_id is None:  # `storable` refuses it first; never a NULL client here
        raise TypeError("an audit entry's event needs its client")
    return event_values(entry.client_id, entry.user_id, note, entry.at)


#: `entry_event_row` of an entry without an event: the binds the statements that write an
#: entry's event in the same statement (`TRADE_SWAP_AUDITED`) skip the insert on.
NO_EVENT = (None, None)


def entry_event_row(entry: AuditEntry) -> tuple[Any, ...]:
    """The event's own values an audited statement binds after the entry's (`e_type`,
    `e_data`: the client, user and time are the entry's): `NO_EVENT` when it carries none."""
    note = entry.event
    if note is None:
        return NO_EVENT
    if entry.client_id is None:  # as `storable` refuses it: never a NULL client sent
        raise TypeError("an audit entry's event needs its client")
    return (note.type._value_, dict(note.data))


def event_from(row: Row) -> Event:
    return Event(
        position=EventPosition(int(row["tx"]), int(row["seq"])),
        client_id=row["client_id"],
        user_id=row["user_id"],
        type=row["type"],
        at=row["at"],
        data=row["data"],
    )


# deposits ---------------------------------------------------------------------------------
def watched_values(wallet: WalletRecord) -> list[dict[str, Any]]:
    """One `watched_addresses` row per address of `wallet`."""
    owner = wallet.owner.value
    return [
        {
            "chain": Chain(chain).value,
            "address": address,
            "client_id": wallet.client_id,
            "owner": owner,
            "user_id": wallet.user_id,
        }
        for chain, address in wallet.addresses.items()
    ]


def watched_from(row: Row) -> Watched:
    return Watched(row["client_id"], WalletOwner(row["owner"]), row["user_id"])


def deposit_move_values(deposit: Deposit) -> dict[str, Any]:
    """What a move of a deposit writes (`DepositStore.move`): its status, block and times."""
    block = deposit.block
    return {
        "status": deposit.status.value,
        "block_height": None if block is None else block.height,
        "block_hash": None if block is None else block.hash,
        "seen_at": deposit.seen_at,
        "confirmed_at": deposit.confirmed_at,
        "reversed_at": deposit.reversed_at,
    }


def deposit_values(deposit: Deposit) -> dict[str, Any]:
    return {
        "deposit_id": deposit.deposit_id,
        "client_id": deposit.client_id,
        "owner": deposit.owner.value,
        "user_id": deposit.user_id,
        "chain": deposit.chain.value,
        "asset_id": deposit.asset_id,
        "address": deposit.address,
        "tx_hash": deposit.tx_hash,
        "position": deposit.position,
        "amount": deposit.amount_units,
        "sender": deposit.sender,
        **deposit_move_values(deposit),
    }


def deposit_from(row: Row) -> Deposit:
    height = row["block_height"]
    return Deposit(
        deposit_id=row["deposit_id"],
        client_id=row["client_id"],
        owner=WalletOwner(row["owner"]),
        user_id=row["user_id"],
        chain=Chain(row["chain"]),
        asset_id=int(row["asset_id"]),
        address=row["address"],
        tx_hash=row["tx_hash"],
        position=row["position"],
        amount_units=int(row["amount"]),
        sender=row["sender"],
        status=DepositStatus(row["status"]),
        block=None if height is None else BlockRef(int(height), row["block_hash"]),
        seen_at=row["seen_at"],
        confirmed_at=row["confirmed_at"],
        reversed_at=row["reversed_at"],
    )


def cursor_values(cursor: ScanCursor) -> dict[str, Any]:
    return {
        "chain": cursor.chain.value,
        "height": cursor.block.height,
        "block_hash": cursor.block.hash,
        "updated_at": cursor.updated_at,
    }


def cursor_from(row: Row) -> ScanCursor:
    return ScanCursor(
        Chain(row["chain"]), BlockRef(int(row["height"]), row["block_hash"]), row["updated_at"]
    )


# webhooks -------------------------------------------------------------------------------
#: The columns an operator's change writes (`WebhookStore.put`); the rest is the job's.
WEBHOOK_SETTINGS_COLUMNS = (
    "url",
    "secret",
    "previous_secret",
    "previous_until",
    "paused",
    "disabled_reason",
    "disabled_at",
    "updated_at",
)


def webhook_values(endpoint: WebhookEndpoint) -> dict[str, Any]:
    cursor = endpoint.cursor
    return {
        "client_id": endpoint.client_id,
        "url": endpoint.url,
        "secret": bytes(endpoint.secret),
        "previous_secret": None
        if endpoint.previous_secret is None
        else bytes(endpoint.previous_secret),
        "previous_until": endpoint.previous_until,
        "paused": endpoint.paused,
        "disabled_reason": endpoint.disabled_reason,
        "disabled_at": endpoint.disabled_at,
        "cursor_tx": None if cursor is None else cursor.tx,
        "cursor_seq": None if cursor is None else cursor.seq,
        "attempts": endpoint.attempts,
        "next_attempt_at": endpoint.next_attempt_at,
        "lease_owner": endpoint.lease_owner,
        "lease_until": endpoint.lease_until,
        "created_at": endpoint.created_at,
        "updated_at": endpoint.updated_at,
    }


def webhook_from(row: Row) -> WebhookEndpoint:
    tx, seq, previous = row["cursor_tx"], row["cursor_seq"], row["previous_secret"]
    return WebhookEndpoint(
        client_id=row["client_id"],
        url=row["url"],
        secret=bytes(row["secret"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        previous_secret=None if previous is None else bytes(previous),
        previous_until=row["previous_until"],
        paused=bool(row["paused"]),
        disabled_reason=row["disabled_reason"],
        disabled_at=row["disabled_at"],
        cursor=None if tx is None else EventPosition(int(tx), int(seq)),
        attempts=int(row["attempts"]),
        next_attempt_at=row["next_attempt_at"],
        lease_owner=row["lease_owner"],
        lease_until=row["lease_until"],
    )


def attempt_values(attempt: DeliveryAttempt) -> dict[str, Any]:
    return {
        "client_id": attempt.client_id,
        "event_id": attempt.event_id,
        "attempt": attempt.attempt,
        "at": attempt.at,
        "status": attempt.status,
        "error": None if attempt.error is None else attempt.error.value,
        "duration_ms": round(attempt.seconds * 1000),
        "result": attempt.result.value,
        "next_attempt_at": attempt.next_attempt_at,
    }


def attempt_from(row: Row) -> DeliveryAttempt:
    status, error = row["status"], row["error"]
    return DeliveryAttempt(
        client_id=row["client_id"],
        event_id=row["event_id"],
        attempt=int(row["attempt"]),
        at=row["at"],
        status=None if status is None else int(status),
        error=None if error is None else DeliveryError(error),
        seconds=int(row["duration_ms"]) / 1000,
        result=AttemptResult(row["result"]),
        next_attempt_at=row["next_attempt_at"],
    )


# desk pauses ----------------------------------------------------------------------------
def desk_pause_values(pause: DeskPause) -> dict[str, Any]:
    return {
        "client_id": pause.client_id,
        "asset_id": pause.asset_id,
        "reason": pause.reason,
        "paused_at": pause.paused_at,
    }


def desk_pause_from(row: Row) -> DeskPause:
    return DeskPause(
        client_id=row["client_id"],
        asset_id=int(row["asset_id"]),
        reason=row["reason"],
        paused_at=row["paused_at"],
    )


# withdrawal policies -----------------------------------------------------------------------
def policy_version_values(version: PolicyVersion) -> dict[str, Any]:
    return {
        "client_id": version.client_id,
        "version": version.version,
        "document": version.policy.document(),
        "set_at": version.set_at,
        "effective_at": version.effective_at,
        "set_by": version.set_by,
    }


def policy_version_from(row: Row) -> PolicyVersion:
    document = row["document"]
    if isinstance(document, str):  # a driver that hands JSON back as its text
        document = json.loads(document)
    return PolicyVersion(
        client_id=row["client_id"],
        version=int(row["version"]),
        policy=Policy.parse(document),
        set_at=row["set_at"],
        effective_at=row["effective_at"],
        set_by=row["set_by"],
    )


def allowlist_values(item: AllowlistEntry) -> dict[str, Any]:
    return {
        "client_id": item.client_id,
        "chain": Chain(item.chain).value,
        "address": item.address,
        "asset_id": item.asset_id,
        "label": item.label,
        "added_at": item.added_at,
        "usable_at": item.usable_at,
        "added_by": item.added_by,
    }


def allowlist_from(row: Row) -> AllowlistEntry:
    asset_id = row["asset_id"]
    return AllowlistEntry(
        client_id=row["client_id"],
        chain=Chain(row["chain"]),
        address=row["address"],
        label=row["label"],
        added_at=row["added_at"],
        usable_at=row["usable_at"],
        asset_id=None if asset_id is None else int(asset_id),
        added_by=row["added_by"],
    )


def usage_values(usage: Usage) -> dict[str, Any]:
    return {
        "client_id": usage.client_id,
        "request_id": usage.request_id,
        "wallet": WalletKind(usage.wallet).value,
        "origin": Origin(usage.origin).value,
        "user_id": usage.user_id,
        "chain": Chain(usage.chain).value,
        "asset_id": usage.asset_id,
        "amount_units": usage.amount_units,
        "at": usage.at,
    }


def usage_from(row: Row) -> Usage:
    return Usage(
        client_id=row["client_id"],
        request_id=row["request_id"],
        wallet=WalletKind(row["wallet"]),
        origin=Origin(row["origin"]),
        user_id=row["user_id"],
        chain=Chain(row["chain"]),
        asset_id=int(row["asset_id"]),
        amount_units=int(row["amount_units"]),
        at=row["at"],
    )


def approvers_text(approvers: tuple[str, ...]) -> str:
    """An approval's approvers as stored: one JSON text per list, so the compare-and-set
    compares the text (`transfer_approvals.approvers`)."""
    return json.dumps(list(approvers), ensure_ascii=True, separators=(",", ":"))


def approval_values(approval: Approval) -> dict[str, Any]:
    transfer = approval.transfer
    return {
        "id": approval.id,
        "client_id": approval.client_id,
        "request_id": approval.request_id,
        "rule": approval.rule,
        "required": approval.required,
        "initiated_by": approval.initiated_by,
        "wallet": WalletKind(transfer.wallet).value,
        "origin": Origin(transfer.origin).value,
        "user_id": transfer.user_id,
        "chain": Chain(transfer.chain).value,
        "asset_id": transfer.asset_id,
        "symbol": transfer.symbol,
        "decimals": transfer.decimals,
        "amount_units": transfer.amount_units,
        "recipient": transfer.recipient,
        "destination": Destination(transfer.destination).value,
        "created_at": approval.created_at,
        "expires_at": approval.expires_at,
        **approval_move_values(approval),
    }


def approval_move_values(approval: Approval) -> dict[str, Any]:
    """What a move of an approval writes (`PolicyStore.move_approval`)."""
    return {
        "status": ApprovalStatus(approval.status).value,
        "approvers": approvers_text(approval.approvers),
        "required": approval.required,
        "expires_at": approval.expires_at,
        "decided_at": approval.decided_at,
        "reason": approval.reason,
    }


def approval_from(row: Row) -> Approval:
    return Approval(
        id=row["id"],
        client_id=row["client_id"],
        request_id=row["request_id"],
        rule=row["rule"],
        required=int(row["required"]),
        initiated_by=row["initiated_by"],
        transfer=Transfer(
            wallet=WalletKind(row["wallet"]),
            origin=Origin(row["origin"]),
            user_id=row["user_id"],
            chain=Chain(row["chain"]),
            asset_id=int(row["asset_id"]),
            symbol=row["symbol"],
            decimals=int(row["decimals"]),
            amount_units=int(row["amount_units"]),
            recipient=row["recipient"],
            destination=Destination(row["destination"]),
        ),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        status=ApprovalStatus(row["status"]),
        approvers=tuple(str(name) for name in json.loads(row["approvers"])),
        decided_at=row["decided_at"],
        reason=row["reason"],
    )


def operator_values(operator: Operator) -> dict[str, Any]:
    return {
        "name": operator.name,
        "key_hash": operator.key_hash,
        "created_at": operator.created_at,
        "disabled_at": operator.disabled_at,
    }


def operator_from(row: Row) -> Operator:
    return Operator(
        name=row["name"],
        key_hash=row["key_hash"],
        created_at=row["created_at"],
        disabled_at=row["disabled_at"],
    )
