"""TRON's transaction bytes: the protobuf of `protocol.Transaction` for the two contracts a
transfer uses, written and read here (proto3 wire format, no protobuf runtime needed).

- `Raw.encode()` is `Transaction.raw` (`raw_data`); the txID is its SHA-256, and that digest
  is what the owner signs (secp256k1, `r || s || recovery id`).
- `signed_bytes(raw, signatures)` is the whole `Transaction` the node takes at
  `wallet/broadcasthex`; `split_signed` reads it back, keeping `raw_data`'s bytes exactly as
  they were sent (the txID is over those bytes, never over a re-encoding).

Fields (tron.proto): `raw`: ref_block_bytes 1, ref_block_hash 4, expiration 8, data 10,
contract 11, timestamp 14, fee_limit 18; `Contract`: type 1, parameter 2 (`Any`: type_url 1,
value 2), Permission_id 5; `TransferContract`: owner_address 1, to_address 2, amount 3;
`TriggerSmartContract`: owner_address 1, contract_address 2, call_value 3, data 4;
`Transaction`: raw_data 1, signature 2 (repeated).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

TRANSFER = "TransferContract"
TRIGGER = "TriggerSmartContract"
_TYPES = {TRANSFER: 1, TRIGGER: 31}
_NAMES = {v: k for k, v in _TYPES.items()}
_TYPE_URL = "type.googleapis.com/protocol."
_VARINT, _BYTES = 0, 2


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 as protobuf writes it
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value) if value else b""


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(value)) + value if value else b""


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a message: ints and byte strings."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, at = _read_varint(data, at)
            yield field, value
        elif wire == _BYTES:
            size, at = _read_varint(data, at)
            if at + size > len(data):
                raise ValueError("truncated field")
            yield field, data[at : at + size]
            at += size
        else:
            raise ValueError(f"unexpected wire type {wire}")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True, slots=True)
class Contract:
    """A TransferContract (`to` the recipient, `amount` in sun) or a TriggerSmartContract
    (`to` the contract, `amount` the call value, `data` the call). Addresses: 21 bytes."""

    kind: str
    owner: bytes
    to: bytes
    amount: int = 0
    data: bytes = b""
    permission_id: int = 0

    def parameter(self) -> bytes:
        if self.kind == TRANSFER:
            return _bytes(1, self.owner) + _bytes(2, self.to) + _int(3, self.amount)
        return (
            _bytes(1, self.owner) + _bytes(2, self.to) + _int(3, self.amount) + _bytes(4, self.data)
        )

    def encode(self) -> bytes:
        any_ = _bytes(1, (_TYPE_URL + self.kind).encode()) + _bytes(2, self.parameter())
        return _int(1, _TYPES[self.kind]) + _bytes(2, any_) + _int(5, self.permission_id)

    @classmethod
    def decode(cls, data: bytes) -> Contract:
        kind, param, permission = 0, b"", 0
        for field, value in fields(data):
            if field == 1 and isinstance(value, int):
                kind = value
            elif field == 2 and isinstance(value, bytes):
                param = next((v for f, v in fields(value) if f == 2 and isinstance(v, bytes)), b"")
            elif field == 5 and isinstance(value, int):
                permission = value
        if kind not in _NAMES:
            raise ValueError(f"unsupported contract type {kind}")
        values: dict[int, int | bytes] = dict(fields(param))
        owner, to = values.get(1, b""), values.get(2, b"")
        amount, call = values.get(3, 0), values.get(4, b"")
        if not (isinstance(owner, bytes) and isinstance(to, bytes)):
            raise ValueError("malformed contract addresses")  # noqa: TRY004 - bad bytes
        if not (isinstance(amount, int) and isinstance(call, bytes)):
            raise ValueError("malformed contract fields")  # noqa: TRY004 - bad bytes
        return cls(_NAMES[kind], owner, to, _signed64(amount), call, permission)


@dataclass(frozen=True, slots=True)
class Raw:
    """`Transaction.raw`: one contract, the reference block, expiration and fee limit."""

    contract: Contract
    ref_block_bytes: bytes
    ref_block_hash: bytes
    expiration: int
    timestamp: int
    fee_limit: int = 0
    data: bytes = b""

    def encode(self) -> bytes:
        return (
            _bytes(1, self.ref_block_bytes)
            + _bytes(4, self.ref_block_hash)
            + _int(8, self.expiration)
            + _bytes(10, self.data)
            + _bytes(11, self.contract.encode())
            + _int(14, self.timestamp)
            + _int(18, self.fee_limit)
        )

    @classmethod
    def decode(cls, data: bytes) -> Raw:
        values: dict[int, list[int | bytes]] = {}
        for field, value in fields(data):
            values.setdefault(field, []).append(value)
        contracts = values.get(11, [])
        if len(contracts) != 1 or not isinstance(contracts[0], bytes):
            raise ValueError("a transaction carries exactly one contract here")

        def one(field: int, default: int | bytes) -> int | bytes:
            return values.get(field, [default])[-1]

        ref_bytes, ref_hash, memo = one(1, b""), one(4, b""), one(10, b"")
        expiration, timestamp, fee_limit = one(8, 0), one(14, 0), one(18, 0)
        if not all(isinstance(v, bytes) for v in (ref_bytes, ref_hash, memo)):
            raise ValueError("malformed raw_data")
        if not all(isinstance(v, int) for v in (expiration, timestamp, fee_limit)):
            raise ValueError("malformed raw_data")
        return cls(
            Contract.decode(contracts[0]),
            ref_bytes,  # type: ignore[arg-type]
            ref_hash,  # type: ignore[arg-type]
            expiration,  # type: ignore[arg-type]
            timestamp,  # type: ignore[arg-type]
            fee_limit,  # type: ignore[arg-type]
            memo,  # type: ignore[arg-type]
        )


def txid(raw_bytes: bytes) -> str:
    """The transaction id: SHA-256 of the `raw_data` bytes, in hex."""
    return hashlib.sha256(raw_bytes).hexdigest()


def signed_bytes(raw_bytes: bytes, signatures: list[bytes]) -> bytes:
    """The whole `Transaction`: `raw_data` and its signatures."""
    return _bytes(1, raw_bytes) + b"".join(
        _key(2, _BYTES) + _varint(len(s)) + s for s in signatures
    )


def split_signed(data: bytes) -> tuple[bytes, list[bytes]]:
    """(`raw_data` bytes as sent, signatures) of a whole `Transaction`."""
    raw, signatures = None, []
    for field, value in fields(data):
        if field == 1 and isinstance(value, bytes):
            raw = value
        elif field == 2 and isinstance(value, bytes):
            signatures.append(value)
    if raw is None:
        raise ValueError("no raw_data")
    return raw, signatures


__all__ = ["TRANSFER", "TRIGGER", "Contract", "Raw", "signed_bytes", "split_signed", "txid"]
