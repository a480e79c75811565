"""What each change publishes on the event feed (`EventNote`, walletcore.domain.events):
the type, and the data an integrator acts on without another call. Amounts are decimal
strings in the asset's units (trades: the wire's 6 places; deposits and sends: exact),
times the wire's, ids as the endpoints name them.

- A trade's move: `trade.approved` (open -> executing), `trade.completed`, `trade.failed`,
  `trade.expired`, `trade.cancelled`; the trade's figures as `/trade` shows them. A move
  that is not news to the client (the venue accepted an order it still works, an approval
  the venue could not price reopened) publishes nothing.
- A send: `send.pending` when the network accepted it, `send.success` / `send.failed`
  once final, `send.replaced` when a bump, a cancel or a re-signed transaction took its
  place (the new hash, the one it replaced).
- A deposit: `deposit.seen`, `deposit.confirmed`, `deposit.reversed`.
"""

from __future__ import annotations

from walletcore.domain.catalog import Catalog
from walletcore.domain.deposits import Deposit
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.money import format_balance, format_optional
from walletcore.domain.times import format_optional_datetime
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.domain.wire import JsonValue
from walletcore.services.send_record import SignedSend

_TRADE_EVENTS = {
    TradeStatus.COMPLETED: EventType.TRADE_COMPLETED,
    TradeStatus.FAILED: EventType.TRADE_FAILED,
    TradeStatus.EXPIRED: EventType.TRADE_EXPIRED,
    TradeStatus.CANCELLED: EventType.TRADE_CANCELLED,
}


def trade_note(before: TradeStatus, new: Trade) -> EventNote | None:
    """The event of the move of a trade from `before` to `new`, or None when it is not
    news."""
    if new.status is before:
        return None
    if before is TradeStatus.OPEN and new.status is TradeStatus.EXECUTING:
        kind = EventType.TRADE_APPROVED
    else:
        found = _TRADE_EVENTS.get(new.status)
        if found is None:
            return None
        kind = found
    figures = new.figures
    data: dict[str, JsonValue] = {
        "tradeId": new.trade_id,
        "side": new.side.value,
        "assetId": new.asset_id,
        "symbol": new.symbol,
        "fiat": new.fiat.value,
        "status": new.status.value,
        "cryptoAmount": format_optional(figures.crypto_amount),
        "fiatAmount": format_optional(figures.fiat_amount),
        "price": format_optional(figures.price),
        "approvedAt": format_optional_datetime(new.approved_at),
        "completedAt": format_optional_datetime(new.completed_at),
    }
    if new.reference is not None:
        data["reference"] = new.reference
    if new.status is TradeStatus.FAILED and new.failure_reason:
        data["reason"] = new.failure_reason
    return EventNote(kind, data)


def send_note(
    kind: EventType,
    signed: SignedSend,
    request_id: str,
    catalog: Catalog,
    *,
    tx_hash: str | None = None,
    replaced: str | None = None,
) -> EventNote:
    """The event of a send (the platform wallet's too: `userId` null on the event)."""
    native = catalog.native_asset(signed.chain)
    asset = catalog.get(signed.asset_id)
    data: dict[str, JsonValue] = {
        "requestId": request_id,
        "chain": str(signed.chain),
        "assetId": signed.asset_id,
        "txHash": tx_hash or signed.tx_hash,
        "from": signed.sender,
        "to": signed.recipient,
        "amount": (
            None
            if signed.amount_units is None or asset is None
            else format_balance(signed.amount_units, asset.decimals)
        ),
        "maxFee": format_balance(signed.fee_units, native.decimals),
        "feePayer": signed.fee_payer.value,
        "wallet": "user" if signed.user_id is not None else "platform",
    }
    if replaced is not None:
        data["replaces"] = replaced
    return EventNote(kind, data)


def deposit_note(kind: EventType, deposit: Deposit, catalog: Catalog) -> EventNote:
    asset = catalog.get(deposit.asset_id)
    decimals = asset.decimals if asset is not None else 0
    amount = format_balance(deposit.amount_units, decimals)
    return EventNote(
        kind,
        {
            "depositId": deposit.deposit_id,
            "chain": str(deposit.chain),
            "assetId": deposit.asset_id,
            "symbol": asset.symbol if asset is not None else None,
            "amount": amount,
            "address": deposit.address,
            "wallet": deposit.owner.value,
            "txHash": deposit.tx_hash,
            "position": deposit.position,
            "from": deposit.sender,
            "status": deposit.status.value,
            "blockHeight": None if deposit.block is None else deposit.block.height,
            "blockHash": None if deposit.block is None else deposit.block.hash,
        },
    )


__all__ = ["deposit_note", "send_note", "trade_note"]
