"""Transaction rows from EVM transactions, receipts and ERC20 Transfer logs.

- native: the wallet is the sender or the recipient and coin moved; `amount` is the value
  (a token transfer, which moves none, is not a row of the native coin).
- token: the first Transfer log of the asset's contract in the receipt that names the
  wallet gives `type` and `amount`; a transaction of the wallet without one (it reverted,
  or moved nothing) gives `type` and `amount` None (the spec's EVM token lookup rule).
- fee: gas used x effective gas price once mined; while pending, the most it can cost.
- status: pending until mined with `confirmations` blocks; failed when it reverted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from eth_abi.abi import decode as abi_decode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from walletcore.domain.wallet import TxRow

TRANSFER_TOPIC = "0x" + keccak(b"Transfer(address,address,uint256)").hex()
TRANSFER_SELECTOR = keccak(b"transfer(address,uint256)")[:4]
BALANCE_OF_SELECTOR = keccak(b"balanceOf(address)")[:4]


def hexstr(value: Any) -> str:
    """A hash or topic as `0x` + lowercase hex, whatever web3 handed (bytes or str)."""
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    text = str(value).lower()
    return text if text.startswith("0x") else "0x" + text


def topic_address(topic: Any) -> str:
    return to_checksum_address("0x" + hexstr(topic)[-40:])


def transfer_logs(receipt: Mapping[str, Any], contract: str) -> list[tuple[str, str, int]]:
    """(from, to, value) of every ERC20 Transfer log of `contract` in the receipt."""
    out = []
    for log in receipt.get("logs", ()):
        topics = log.get("topics", ())
        if len(topics) != 3 or hexstr(topics[0]) != TRANSFER_TOPIC:
            continue
        if str(log["address"]).lower() != contract.lower():
            continue
        data = log["data"]
        value = int.from_bytes(
            bytes(data) if not isinstance(data, str) else bytes.fromhex(data.removeprefix("0x")),
            "big",
        )
        out.append((topic_address(topics[1]), topic_address(topics[2]), value))
    return out


def decode_transfer_input(data: Any) -> tuple[str, int] | None:
    """(recipient, amount) of a `transfer(address,uint256)` call, else None."""
    raw = bytes(data) if not isinstance(data, str) else bytes.fromhex(data.removeprefix("0x"))
    if raw[:4] != TRANSFER_SELECTOR:
        return None
    try:
        recipient, amount = abi_decode(["address", "uint256"], raw[4:])
    except Exception:  # noqa: BLE001 - not a well-formed call: no figures
        return None
    return to_checksum_address(recipient), int(amount)


def row(
    address: str,
    contract: str | None,
    tx: Mapping[str, Any],
    receipt: Mapping[str, Any] | None,
    block_time: int | None,
    latest: int,
    confirmations: int,
) -> TxRow | None:
    """The row of `tx` for the wallet at `address` (`contract`: the token, None: native),
    or None when the transaction is not the wallet's for that asset."""
    me = address.lower()
    sender = str(tx["from"]).lower()
    to = str(tx.get("to") or "").lower()
    kind: str | None
    amount: int | None
    if contract is None:
        if me not in (sender, to) or int(tx["value"]) == 0:
            return None  # not the wallet's, or no coin moved (a token transfer's gas)
        kind, amount = ("send" if sender == me else "receive"), int(tx["value"])
    else:
        found = None
        if receipt is not None:
            mine = [
                t for t in transfer_logs(receipt, contract) if me in (t[0].lower(), t[1].lower())
            ]
            found = mine[0] if mine else None
        elif to == contract.lower() and sender == me:
            call = decode_transfer_input(tx.get("input", b""))
            found = (address, call[0], call[1]) if call else None
        if found is not None:
            kind = "send" if found[0].lower() == me else "receive"
            amount = found[2]
        elif sender == me and to == contract.lower():
            kind, amount = None, None
        else:
            return None
    return TxRow(
        hash=hexstr(tx["hash"]),
        type=kind,
        amount_units=amount,
        fee_units=_fee(tx, receipt),
        status=_status(receipt, latest, confirmations),
        date=_date(receipt, block_time, latest, confirmations),
    )


def _fee(tx: Mapping[str, Any], receipt: Mapping[str, Any] | None) -> int:
    if receipt is not None:
        price = receipt.get("effectiveGasPrice") or tx.get("gasPrice") or 0
        return int(receipt["gasUsed"]) * int(price)
    price = tx.get("maxFeePerGas") or tx.get("gasPrice") or 0
    return int(tx["gas"]) * int(price)


def _status(receipt: Mapping[str, Any] | None, latest: int, confirmations: int) -> str:
    if receipt is None:
        return "pending"
    if int(receipt.get("status", 1)) == 0:
        return "failed"
    depth = latest - int(receipt["blockNumber"]) + 1
    return "success" if depth >= confirmations else "pending"


def _date(
    receipt: Mapping[str, Any] | None, block_time: int | None, latest: int, confirmations: int
) -> datetime | None:
    if receipt is None or block_time is None:
        return None
    if _status(receipt, latest, confirmations) == "pending":
        return None
    return datetime.fromtimestamp(block_time, UTC)


__all__ = ["BALANCE_OF_SELECTOR", "TRANSFER_SELECTOR", "TRANSFER_TOPIC", "row", "transfer_logs"]
