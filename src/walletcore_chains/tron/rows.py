"""TRON transactions decoded into the spec's transaction row: from a full node's
`gettransactionbyid` + `gettransactioninfobyid` (lookup), and from TronGrid's
`/v1/accounts/...` rows (history).

- TRX: a TransferContract naming the wallet as owner (`send`) or recipient (`receive`).
- TRC20: the receipt's `Transfer(address,address,uint256)` log of the token's contract
  naming the wallet; a failed call of the wallet (no log) reads `send` with the amount it
  asked to move (`transfer(address,uint256)`'s argument), status `failed`.
- `status`: `success` / `failed` only once the block is solidified; a receipt whose result
  is not `SUCCESS` (`OUT_OF_ENERGY`, `REVERT`, ...) or a transaction result `FAILED` is
  `failed` (its fee was still burned). `fee`: the receipt's `fee` (every sun burned:
  bandwidth, energy, activation), 0 while the transaction is in no block.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from eth_utils.crypto import keccak
from tronpy.keys import to_base58check_address  # type: ignore[import-untyped]

from walletcore.domain.wallet import TxRow
from walletcore_chains.tron.proto import TRANSFER, TRIGGER

TRANSFER_SELECTOR = "transfer(address,uint256)"
TRANSFER_METHOD_ID = keccak(text=TRANSFER_SELECTOR)[:4]
TRANSFER_TOPIC = keccak(text="Transfer(address,address,uint256)").hex()


def base58(address: object) -> str | None:
    """A `T...` address of a node's field (hex `41...`, base58, or a 20-byte topic)."""
    if not isinstance(address, str) or not address:
        return None
    text = address.removeprefix("0x")
    if len(text) == 64:  # an indexed topic: the last 20 bytes
        text = "41" + text[-40:]
    elif len(text) == 40:
        text = "41" + text
    try:
        return str(to_base58check_address(text))
    except Exception:  # noqa: BLE001 - not an address
        return None


def date_of(millis: object) -> datetime | None:
    if not isinstance(millis, int) or millis <= 0:
        return None
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def receipt_failed(info: dict[str, Any]) -> bool:
    result = (info.get("receipt") or {}).get("result")
    return info.get("result") == "FAILED" or (result is not None and result != "SUCCESS")


def contract_of(tx: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    contract = (tx.get("raw_data") or {}).get("contract") or [{}]
    first = contract[0]
    return str(first.get("type", "")), dict((first.get("parameter") or {}).get("value") or {})


def _direction(wallet: str, sender: str | None, recipient: str | None) -> str | None:
    if sender == wallet:
        return "send"
    if recipient == wallet:
        return "receive"
    return None


def native_movement(wallet: str, tx: dict[str, Any]) -> tuple[str, int] | None:
    kind, value = contract_of(tx)
    if kind != TRANSFER:
        return None
    way = _direction(wallet, base58(value.get("owner_address")), base58(value.get("to_address")))
    return None if way is None else (way, int(value.get("amount", 0)))


def token_movement(
    wallet: str, contract: str, tx: dict[str, Any], info: dict[str, Any] | None
) -> tuple[str, int] | None:
    for log in (info or {}).get("log") or []:
        topics = log.get("topics") or []
        if base58(log.get("address")) != contract or len(topics) != 3:
            continue
        if str(topics[0]).removeprefix("0x") != TRANSFER_TOPIC:
            continue
        way = _direction(wallet, base58(topics[1]), base58(topics[2]))
        if way is not None:
            return way, int(str(log.get("data") or "0"), 16)
    kind, value = contract_of(tx)
    if kind != TRIGGER or base58(value.get("contract_address")) != contract:
        return None
    if base58(value.get("owner_address")) != wallet:
        return None
    data = bytes.fromhex(str(value.get("data", "")))
    if len(data) != 68 or data[:4] != TRANSFER_METHOD_ID:
        return None
    return "send", int.from_bytes(data[36:68])


def lookup_row(
    wallet: str,
    tx: dict[str, Any],
    info: dict[str, Any] | None,
    *,
    solid: bool,
    token: str | None,
) -> TxRow | None:
    """The wallet's row of one transaction (`token`: the TRC20 contract), or None when the
    transaction does not move this asset for this wallet."""
    moved = (
        native_movement(wallet, tx) if token is None else token_movement(wallet, token, tx, info)
    )
    if moved is None:
        return None
    way, amount = moved
    if info is None or not solid:
        status, date = "pending", None
    else:
        status = "failed" if receipt_failed(info) else "success"
        date = date_of(info.get("blockTimeStamp"))
    fee = int((info or {}).get("fee", 0))
    return TxRow(str(tx.get("txID")), way, amount, fee, status, date)


def grid_native_row(wallet: str, item: dict[str, Any]) -> TxRow | None:
    """A row of TronGrid's `/v1/accounts/{address}/transactions` (solidified only)."""
    moved = native_movement(wallet, item)
    if moved is None:
        return None
    way, amount = moved
    ret = (item.get("ret") or [{}])[0]
    fee = int(ret.get("fee", item.get("net_fee", 0) + item.get("energy_fee", 0)))
    status = "success" if ret.get("contractRet", "SUCCESS") == "SUCCESS" else "failed"
    return TxRow(str(item["txID"]), way, amount, fee, status, date_of(item.get("block_timestamp")))


__all__ = [
    "TRANSFER_METHOD_ID",
    "TRANSFER_SELECTOR",
    "TRANSFER_TOPIC",
    "base58",
    "date_of",
    "grid_native_row",
    "lookup_row",
]
