"""EVM transactions: build the unsigned one, its signing digest, and put it together with a
`ChainKey` signature (r || s || recovery id) -- the private key never leaves the KeyStore.

A `SignedTransfer.raw` of the EVM gateway is a small JSON envelope of one or two signed
transactions, broadcast in order: a sponsored (PLATFORM) transfer is the sponsor's gas
top-up, then the sender's transfer. The transfer's hash is the last transaction's.

A transaction of a replacement ladder (`walletcore_chains.evm.follow`) carries
`replaces: true` in its body and envelope: it reuses a nonce that was reserved, broadcast
and accepted long before, so the gateway's `NonceBook` never hears of it (an envelope or a
body without the flag is an ordinary transfer, as before the flag existed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eth_account._utils.legacy_transactions import (
    encode_transaction,
    serializable_unsigned_transaction_from_dict,
)
from eth_utils.crypto import keccak

ENVELOPE_VERSION = 1


@dataclass(frozen=True, slots=True)
class EvmTx:
    """One unsigned transaction: its fields (web3 names) and who sends it."""

    sender: str
    fields: dict[str, Any]
    #: a rung of a replacement ladder: its nonce is not the NonceBook's to reserve or free
    replaces: bool = False

    @property
    def nonce(self) -> int:
        return int(self.fields["nonce"])

    @property
    def legacy(self) -> bool:
        """Priced by `gasPrice` (no EIP-1559 max fee and tip)."""
        return "gasPrice" in self.fields

    @property
    def max_fee(self) -> int:
        """The most one unit of gas can cost: the max fee, or the legacy gas price."""
        return int(self.fields["gasPrice" if self.legacy else "maxFeePerGas"])

    def digest(self) -> bytes:
        """The 32-byte hash the sender's key signs."""
        return bytes(serializable_unsigned_transaction_from_dict(self.fields).hash())

    def signed(self, signature: bytes) -> bytes:
        """The raw signed transaction from a 65-byte `r || s || recovery id` signature."""
        if len(signature) != 65:
            raise ValueError("an EVM signature is 65 bytes")
        r = int.from_bytes(signature[:32], "big")
        s = int.from_bytes(signature[32:64], "big")
        recovery = signature[64]
        if "gasPrice" in self.fields:  # legacy, EIP-155
            v = recovery + 35 + 2 * int(self.fields["chainId"])
        else:
            v = recovery
        unsigned = serializable_unsigned_transaction_from_dict(self.fields)
        return bytes(encode_transaction(unsigned, (v, r, s)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": self.sender, "fields": self.fields}
        if self.replaces:
            out["replaces"] = True
        return out

    @classmethod
    def from_json(cls, value: Any) -> EvmTx:
        return cls(str(value["from"]), dict(value["fields"]), value.get("replaces") is True)


@dataclass(frozen=True, slots=True)
class SignedTx:
    sender: str
    nonce: int
    raw: bytes
    #: the native coin it moves (0 on a token transfer: a funds error is then about gas)
    value: int = 0
    #: a rung of a replacement ladder (see `EvmTx.replaces`)
    replaces: bool = False

    @property
    def tx_hash(self) -> str:
        return "0x" + keccak(self.raw).hex()


def tx_fields(
    chain_id: int,
    nonce: int,
    to: str,
    value: int,
    data: bytes,
    gas: int,
    max_fee: int,
    tip: int | None,
) -> dict[str, Any]:
    """A transaction's fields: EIP-1559 (max fee, tip) when `tip` is given, else legacy
    (`max_fee` as the gas price)."""
    fields: dict[str, Any] = {
        "chainId": chain_id,
        "nonce": nonce,
        "to": to,
        "value": value,
        "data": "0x" + data.hex(),
        "gas": gas,
    }
    if tip is None:
        fields["gasPrice"] = max_fee
    else:
        fields.update(type=2, maxFeePerGas=max_fee, maxPriorityFeePerGas=min(tip, max_fee))
    return fields


def encode_body(txs: list[EvmTx]) -> bytes:
    return json.dumps([t.to_json() for t in txs], separators=(",", ":")).encode()


def decode_body(body: bytes) -> list[EvmTx]:
    return [EvmTx.from_json(v) for v in json.loads(body)]


def encode_envelope(txs: list[SignedTx]) -> bytes:
    out = []
    for t in txs:
        one: dict[str, Any] = {"from": t.sender, "nonce": t.nonce, "raw": t.raw.hex()}
        one["value"] = t.value
        if t.replaces:
            one["replaces"] = True
        out.append(one)
    value = {"v": ENVELOPE_VERSION, "txs": out}
    return json.dumps(value, separators=(",", ":")).encode()


def decode_envelope(raw: bytes) -> list[SignedTx]:
    """The signed transactions of an envelope; `ValueError` when it is not one."""
    try:
        value = json.loads(raw)
        if value.get("v") != ENVELOPE_VERSION or not value["txs"]:
            raise ValueError("not an EVM transfer envelope")
        return [
            SignedTx(
                str(t["from"]),
                int(t["nonce"]),
                bytes.fromhex(t["raw"]),
                int(t["value"]),
                t.get("replaces") is True,
            )
            for t in value["txs"]
        ]
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError("not an EVM transfer envelope") from exc


__all__ = [
    "EvmTx",
    "SignedTx",
    "decode_body",
    "decode_envelope",
    "encode_body",
    "encode_envelope",
    "tx_fields",
]
