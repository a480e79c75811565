"""TRON's transaction bytes: the protobuf of `protocol.Transaction` for the two contracts a
transfer uses, written and read by Google's `protobuf` runtime.

- `Raw.encode()` is `Transaction.raw` (`raw_data`); the txID is its SHA-256, and that digest
  is what the owner signs (secp256k1, `r || s || recovery id`).
- `signed_bytes(raw, signatures)` is the whole `Transaction` the node takes at
  `wallet/broadcasthex`; `split_signed` reads it back, keeping `raw_data`'s bytes exactly as
  they were sent (the txID is over those bytes, never over a re-encoding).

No protoc step: the messages are declared here as a `FileDescriptorProto` (package
`protocol`, field numbers and types from tronprotocol/protocol `core/Tron.proto`,
`core/contract/balance_contract.proto` and `core/contract/smart_contract.proto`), in a
private descriptor pool so nothing else that registers `protocol.*` can clash:

- `Transaction { raw raw_data = 1; repeated bytes signature = 2; }`
- `Transaction.raw`: ref_block_bytes 1, ref_block_hash 4, expiration 8 (int64), data 10,
  contract 11 (repeated), timestamp 14 (int64), fee_limit 18 (int64);
- `Transaction.Contract`: type 1 (`ContractType`), parameter 2 (`google.protobuf.Any`),
  Permission_id 5 (int32);
- `TransferContract`: owner_address 1, to_address 2, amount 3 (int64);
- `TriggerSmartContract`: owner_address 1, contract_address 2, call_value 3 (int64), data 4.

`TransactionBytes` is the same wire layout as `Transaction` with `raw_data` declared as
`optional bytes`: parsing a signed transaction with it yields `raw_data`'s bytes untouched.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

TRANSFER = "TransferContract"
TRIGGER = "TriggerSmartContract"
_TYPES = {TRANSFER: 1, TRIGGER: 31}
_NAMES = {v: k for k, v in _TYPES.items()}
_TYPE_URL = "type.googleapis.com/protocol."

_F = descriptor_pb2.FieldDescriptorProto


def _field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int,
    *,
    repeated: bool = False,
    type_name: str = "",
) -> descriptor_pb2.FieldDescriptorProto:
    field = message.field.add(name=name, number=number, type=kind)
    field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        field.type_name = type_name
    return field


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="walletcore/tron/transaction.proto",
        package="protocol",
        syntax="proto3",
        dependency=[any_pb2.DESCRIPTOR.name],
    )
    tx = file.message_type.add(name="Transaction")
    contract = tx.nested_type.add(name="Contract")
    kinds = contract.enum_type.add(name="ContractType")
    kinds.value.add(name="AccountCreateContract", number=0)
    for name, number in _TYPES.items():
        kinds.value.add(name=name, number=number)
    _field(
        contract, "type", 1, _F.TYPE_ENUM, type_name=".protocol.Transaction.Contract.ContractType"
    )
    _field(contract, "parameter", 2, _F.TYPE_MESSAGE, type_name=".google.protobuf.Any")
    _field(contract, "Permission_id", 5, _F.TYPE_INT32)
    raw = tx.nested_type.add(name="raw")
    _field(raw, "ref_block_bytes", 1, _F.TYPE_BYTES)
    _field(raw, "ref_block_hash", 4, _F.TYPE_BYTES)
    _field(raw, "expiration", 8, _F.TYPE_INT64)
    _field(raw, "data", 10, _F.TYPE_BYTES)
    _field(
        raw,
        "contract",
        11,
        _F.TYPE_MESSAGE,
        repeated=True,
        type_name=".protocol.Transaction.Contract",
    )
    _field(raw, "timestamp", 14, _F.TYPE_INT64)
    _field(raw, "fee_limit", 18, _F.TYPE_INT64)
    _field(tx, "raw_data", 1, _F.TYPE_MESSAGE, type_name=".protocol.Transaction.raw")
    _field(tx, "signature", 2, _F.TYPE_BYTES, repeated=True)

    as_bytes = file.message_type.add(name="TransactionBytes")
    as_bytes.oneof_decl.add(name="_raw_data")  # proto3 `optional`: presence is tracked
    _field(as_bytes, "raw_data", 1, _F.TYPE_BYTES).MergeFrom(
        _F(proto3_optional=True, oneof_index=0)
    )
    _field(as_bytes, "signature", 2, _F.TYPE_BYTES, repeated=True)

    transfer = file.message_type.add(name=TRANSFER)
    _field(transfer, "owner_address", 1, _F.TYPE_BYTES)
    _field(transfer, "to_address", 2, _F.TYPE_BYTES)
    _field(transfer, "amount", 3, _F.TYPE_INT64)
    trigger = file.message_type.add(name=TRIGGER)
    _field(trigger, "owner_address", 1, _F.TYPE_BYTES)
    _field(trigger, "contract_address", 2, _F.TYPE_BYTES)
    _field(trigger, "call_value", 3, _F.TYPE_INT64)
    _field(trigger, "data", 4, _F.TYPE_BYTES)
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
_POOL.AddSerializedFile(_file().SerializeToString())


def _class(name: str) -> Any:
    descriptor = _POOL.FindMessageTypeByName(name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(_POOL).GetPrototype(descriptor)  # pragma: no cover


_TransactionBytes = _class("protocol.TransactionBytes")
_RawMessage = _class("protocol.Transaction.raw")
_ContractMessage = _class("protocol.Transaction.Contract")
_PARAMETERS = {TRANSFER: _class(f"protocol.{TRANSFER}"), TRIGGER: _class(f"protocol.{TRIGGER}")}


def _parse(cls: Any, data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except DecodeError as exc:
        raise ValueError(f"malformed {cls.DESCRIPTOR.full_name}: {exc}") from None


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

    def _message(self) -> Any:
        if self.kind == TRANSFER:
            return _PARAMETERS[TRANSFER](
                owner_address=self.owner, to_address=self.to, amount=self.amount
            )
        return _PARAMETERS[TRIGGER](
            owner_address=self.owner,
            contract_address=self.to,
            call_value=self.amount,
            data=self.data,
        )

    def parameter(self) -> bytes:
        return _serialized(self._message())

    def _proto(self) -> Any:
        message = _ContractMessage(type=_TYPES[self.kind], Permission_id=self.permission_id)
        message.parameter.type_url = _TYPE_URL + self.kind
        message.parameter.value = self.parameter()
        return message

    def encode(self) -> bytes:
        return _serialized(self._proto())

    @classmethod
    def decode(cls, data: bytes) -> Contract:
        return cls._from(_parse(_ContractMessage, data))

    @classmethod
    def _from(cls, message: Any) -> Contract:
        kind = _NAMES.get(message.type)
        if kind is None:
            raise ValueError(f"unsupported contract type {message.type}")
        param = _parse(_PARAMETERS[kind], message.parameter.value)
        if kind == TRANSFER:
            to, amount, call = param.to_address, param.amount, b""
        else:
            to, amount, call = param.contract_address, param.call_value, param.data
        return cls(kind, param.owner_address, to, amount, call, message.Permission_id)


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
        return _serialized(
            _RawMessage(
                ref_block_bytes=self.ref_block_bytes,
                ref_block_hash=self.ref_block_hash,
                expiration=self.expiration,
                data=self.data,
                contract=[self.contract._proto()],
                timestamp=self.timestamp,
                fee_limit=self.fee_limit,
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> Raw:
        message = _parse(_RawMessage, data)
        if len(message.contract) != 1:
            raise ValueError("a transaction carries exactly one contract here")
        return cls(
            Contract._from(message.contract[0]),
            message.ref_block_bytes,
            message.ref_block_hash,
            message.expiration,
            message.timestamp,
            message.fee_limit,
            message.data,
        )


def txid(raw_bytes: bytes) -> str:
    """The transaction id: SHA-256 of the `raw_data` bytes, in hex."""
    return hashlib.sha256(raw_bytes).hexdigest()


def _serialized(message: Any) -> bytes:
    """A message's wire bytes (protobuf's runtime is untyped)."""
    data: bytes = message.SerializeToString()
    return data


def signed_bytes(raw_bytes: bytes, signatures: list[bytes]) -> bytes:
    """The whole `Transaction`: `raw_data` and its signatures."""
    message = _TransactionBytes(signature=signatures)
    if raw_bytes:  # proto3: an empty `raw_data` is not written
        message.raw_data = raw_bytes
    return _serialized(message)


def split_signed(data: bytes) -> tuple[bytes, list[bytes]]:
    """(`raw_data` bytes as sent, signatures) of a whole `Transaction`."""
    message = _parse(_TransactionBytes, data)
    if not message.HasField("raw_data"):
        raise ValueError("no raw_data")
    return message.raw_data, list(message.signature)


__all__ = ["TRANSFER", "TRIGGER", "Contract", "Raw", "signed_bytes", "split_signed", "txid"]
