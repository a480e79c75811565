"""Everything of the client that does no I/O: the operations, the request bodies, the
answers decoded into models, the error of an answer, and the retry decisions.

`Client` (`_sync.py`) and `AsyncClient` (`_async.py`) only move bytes and sleep; every
rule they follow is decided here, once.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import random
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import httpx

from . import errors, models

T = TypeVar("T")

TOKEN_EXPIRED = "Missing or expired token"
#: the 401 messages that mean a wrong secret: never retried (spec: "the two meanings of 401")
CREDENTIAL_MESSAGES = ("Invalid credentials", "Invalid password")
ORDER_REJECTED = "Order rejected:"
SEND_IN_PROGRESS = "A request with this X-Request-Id is still in progress"


class Retry(enum.Enum):
    """How an operation may be sent again (the contract's rules)."""

    #: reads, and writes whose repetition answers the first outcome (cancel, collect):
    #: retried on a transport failure, a 500, 502 and 504
    IDEMPOTENT = "idempotent"
    #: `/send`, `/platform/send`: the `X-Request-Id` is the idempotency key, so the same id
    #: is sent again on a transport failure, 409 (in progress), 500, 502 and 504
    SEND = "send"
    #: `/sell`, `/order`: 502 and 504 quoted nothing (retry with back-off); a failed connect
    #: sent nothing
    QUOTE = "quote"
    #: `/create`, `/extend`, `/auth`: only a failed connect (nothing was sent) is retried
    CONNECT_ONLY = "connect-only"
    #: `/trade/approve`: never sent again. A 502/504 or a lost answer leaves the trade to be
    #: polled (`wait_for_trade`): approving it again is the one action that could trade twice
    NEVER = "never"


@dataclass(frozen=True)
class Operation:
    path: str
    method: str
    retry: Retry
    #: the request must carry an `X-Request-Id` (the idempotency key)
    needs_request_id: bool = False
    #: no bearer token (`/auth`)
    anonymous: bool = False


def _op(path: str, method: str, retry: Retry = Retry.IDEMPOTENT, **kw: bool) -> Operation:
    return Operation(path, method, retry, **kw)


#: Every operation of the contract and of the service's additions, by path, with the name of
#: the client method that calls it.
OPERATIONS: dict[str, Operation] = {
    op.path: op
    for op in (
        _op("/auth", "auth", Retry.CONNECT_ONLY, anonymous=True),
        _op("/prices", "prices"),
        _op("/config", "config"),
        _op("/sell", "sell", Retry.QUOTE),
        _op("/order", "order", Retry.QUOTE),
        _op("/trade/approve", "approve", Retry.NEVER),
        _op("/trade/collect", "collect"),
        _op("/trade/cancel", "cancel"),
        _op("/trade", "trade"),
        _op("/trades", "trades"),
        _op("/create", "create", Retry.CONNECT_ONLY),
        _op("/extend", "extend", Retry.CONNECT_ONLY),
        _op("/addresses", "addresses"),
        _op("/balance", "balance"),
        _op("/info", "info"),
        _op("/transactions", "transactions"),
        _op("/txid", "txid"),
        _op("/fee", "fee"),
        _op("/send", "send", Retry.SEND, needs_request_id=True),
        _op("/events", "events"),
        _op("/deposits", "deposits"),
        _op("/webhooks/deliveries", "webhook_deliveries"),
        _op("/policy", "policy"),
        _op("/approvals", "approvals"),
        _op("/platform/addresses", "platform_addresses"),
        _op("/platform/balance", "platform_balance"),
        _op("/platform/info", "platform_info"),
        _op("/platform/transactions", "platform_transactions"),
        _op("/platform/txid", "platform_txid"),
        _op("/platform/fee", "platform_fee"),
        _op("/platform/send", "platform_send", Retry.SEND, needs_request_id=True),
    )
}


# -- retry policy -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    """Exponential back-off with full jitter, bounded by attempts and a total deadline.

    `deadline` bounds one call with all its retries (seconds from its start); each attempt
    is also bounded by the client's `httpx.Timeout`.
    """

    attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 5.0
    deadline: float = 30.0

    def delay(self, attempt: int) -> float:
        """The pause before retry number `attempt` (1 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    def next_delay(self, retries_done: int, elapsed: float) -> float | None:
        """The pause before the next retry, or None: no attempt or time left for one."""
        if retries_done + 1 >= self.attempts:
            return None
        pause = self.delay(retries_done + 1)
        if elapsed + pause >= self.deadline:
            return None
        return pause


def retry_safe_status(op: Operation, status: int, message: str) -> bool:
    """Whether the same call may be sent again after this error answer (the contract)."""
    if status == 401:
        return message == TOKEN_EXPIRED
    if op.retry is Retry.NEVER:
        # approve: after a 502 or a 504 the trade is polled, never approved again (a 504
        # leaves the outcome unknown; `/trade` tells whether a 502 left it open)
        return False
    if op.retry is Retry.SEND:
        if status == 409:
            return message == SEND_IN_PROGRESS
        return status in (500, 502, 504)
    if op.retry is Retry.QUOTE:
        return status in (502, 504)
    if op.retry is Retry.IDEMPOTENT:
        return status in (500, 502, 504)
    return False


def retry_safe_transport(op: Operation, exc: httpx.TransportError) -> bool:
    """Whether the same call may be sent again after no answer came."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return True  # no connection: nothing was sent
    return op.retry in (Retry.IDEMPOTENT, Retry.SEND)


def transport_error(
    op: Operation, exc: httpx.TransportError, request_id: str | None
) -> errors.TransportError:
    kind = type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        hint = "no connection: nothing was sent"
    elif op.retry is Retry.NEVER:
        hint = "the outcome is unknown: poll the trade, never approve it again"
    elif op.retry is Retry.SEND:
        hint = "the outcome is unknown: send again with the same request id"
    else:
        hint = "no answer"
    return errors.TransportError(
        f"{kind}: {hint}",
        request_id=request_id,
        retry_safe=retry_safe_transport(op, exc),
        operation=op.path,
    )


# -- requests ---------------------------------------------------------------------------------
def new_request_id() -> str:
    return uuid.uuid4().hex


def amount_text(value: Decimal | str | int) -> str:
    """An amount as the wire's plain decimal string; a float is refused (it is not exact)."""
    if isinstance(value, bool | float):
        raise TypeError("amounts are Decimal, str or int, never float")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError("an amount must be finite")
        return format(value, "f")
    if isinstance(value, int):
        return str(value)
    return value


def body(**fields: Any) -> dict[str, Any]:
    """A request body in wire names, without the fields left out (None)."""
    return {key: value for key, value in fields.items() if value is not None}


def quote_body(
    user_id: str,
    asset_id: int,
    crypto_amount: Decimal | str | int | None,
    fiat_amount: Decimal | str | int | None,
    fiat: str | None,
) -> dict[str, Any]:
    """The body of `/sell` and `/order` (exactly one of the two amounts; the service says
    so when not)."""
    return body(
        userId=user_id,
        assetId=asset_id,
        fiat=fiat,
        cryptoAmount=None if crypto_amount is None else amount_text(crypto_amount),
        fiatAmount=None if fiat_amount is None else amount_text(fiat_amount),
    )


def encode(payload: Mapping[str, Any] | None) -> bytes | None:
    return None if payload is None else json.dumps(payload, separators=(",", ":")).encode()


def headers(
    op: Operation, token: str | None, request_id: str | None, has_body: bool
) -> dict[str, str]:
    out: dict[str, str] = {"Accept": "application/json"}
    if has_body:
        out["Content-Type"] = "application/json"
    if token is not None and not op.anonymous:
        out["Authorization"] = f"Bearer {token}"
    if request_id is not None:
        out["X-Request-Id"] = request_id
    return out


# -- answers ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """A success envelope: its status (200, or 202 for a held send), result and request id."""

    status: int
    result: Any
    request_id: str


def read_answer(
    op: Operation, status: int, content: bytes, sent_request_id: str | None
) -> Answer | errors.WalletcoreError:
    """The answer of the service: the envelope's result, or the error it stands for."""
    try:
        envelope = json.loads(content, parse_float=Decimal) if content else None
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict):
        return errors.WalletcoreError(
            f"not a walletcore answer (HTTP {status})",
            status=status,
            request_id=sent_request_id,
            retry_safe=False,
            operation=op.path,
        )
    request_id = str(envelope.get("requestId") or sent_request_id or "")
    if status in (200, 202) and "result" in envelope:
        return Answer(status, envelope["result"], request_id)
    message = str(envelope.get("message") or f"HTTP {status}")
    return error_of(op, status, message, request_id or None)


def error_of(
    op: Operation, status: int, message: str, request_id: str | None
) -> errors.WalletcoreError:
    cls: type[errors.WalletcoreError] = errors.BY_STATUS.get(status, errors.WalletcoreError)
    if status == 401:
        if message == TOKEN_EXPIRED:
            cls = errors.TokenExpired
        elif message in CREDENTIAL_MESSAGES:
            cls = errors.InvalidCredentials
    elif status == 502 and message.startswith(ORDER_REJECTED):
        cls = errors.OrderRejected
    elif status == 400 and op.path == "/events" and "cursor" in message.lower():
        cls = errors.UnknownCursor
    return cls(
        message,
        status=status,
        request_id=request_id,
        retry_safe=retry_safe_status(op, status, message),
        operation=op.path,
    )


def should_retry(op: Operation, error: errors.WalletcoreError) -> bool:
    """The client's own retry: only what the contract calls safe (401s are handled apart:
    one new token and one replay). `approve` is never sent again, not even after a failed
    connect."""
    if op.retry is Retry.NEVER:
        return False
    if op.retry is Retry.SEND and error.status == 502:
        return False  # the network refused it; the same id answers that refusal again
    return error.retry_safe and error.status != 401


# -- decoding into models ---------------------------------------------------------------------
def parse_datetime(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"a timestamp without a time zone: {text!r}")
    return value.astimezone(UTC)


def parse_decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise TypeError("a boolean is not an amount")
    if isinstance(value, Decimal | int | str):
        return Decimal(value)
    raise TypeError(f"not an amount: {type(value).__name__}")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def decode(tp: Any, value: Any) -> Any:
    """`value` (JSON decoded with `parse_float=Decimal`) as the type `tp` of a model field."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if value is None:
            return None
        return decode(options[0], value)
    if tp is type(None):
        if value is not None:
            raise TypeError(f"expected null, got {type(value).__name__}")
        return None
    if tp is Any:
        return value
    if tp is Decimal:
        return parse_decimal(value)
    if tp is datetime:
        return parse_datetime(value)
    if tp is float:
        return float(value)
    if tp in (int, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return tuple(decode(item, one) for one in value)
    if origin is list:
        item = typing.get_args(tp)[0]
        return [decode(item, one) for one in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        return {str(key): decode(item, one) for key, one in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return decode_model(tp, value)
    raise TypeError(f"no decoder for {tp!r}")


def decode_model(cls: type[T], value: Any, **local: Any) -> T:
    """A model from its wire object; `local` sets the fields that are not on the wire."""
    if not isinstance(value, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(value).__name__}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get(models.WIRE, True) is False:
            if f.name in local:
                kwargs[f.name] = local[f.name]
            continue
        if f.name in value:
            kwargs[f.name] = decode(hints[f.name], value[f.name])
        elif f.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}: the answer has no {f.name}")
    return cls(**kwargs)


def decode_result(tp: Any, answer: Answer) -> Any:
    try:
        return decode(tp, answer.result)
    except (TypeError, ValueError, ArithmeticError, KeyError, AttributeError) as exc:
        raise errors.WalletcoreError(
            f"unexpected answer: {exc}", status=answer.status, request_id=answer.request_id
        ) from exc


def fee_of(answer: Answer) -> Decimal | models.TronFee:
    if isinstance(answer.result, dict):
        return typing.cast(models.TronFee, decode_result(models.TronFee, answer))
    return typing.cast(Decimal, decode_result(Decimal, answer))


def send_outcome(answer: Answer, request_id: str) -> models.SendResult | models.HeldSend:
    """A `/send` answer: 200 a sent transfer, 202 a transfer held for approval."""
    try:
        if answer.status == 202:
            return decode_model(models.HeldSend, answer.result, request_id=request_id)
        return decode_model(models.SendResult, answer.result, request_id=request_id)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise errors.WalletcoreError(
            f"unexpected answer: {exc}", status=answer.status, request_id=request_id
        ) from exc


# -- tokens -----------------------------------------------------------------------------------
def token_fresh(token: models.Token | None, refresh_early: float) -> bool:
    """A cached token still usable: more than `refresh_early` seconds before `expiresAt`."""
    if token is None:
        return False
    return datetime.now(UTC) + timedelta(seconds=refresh_early) < token.expiresAt


def keeps_polling(error: errors.WalletcoreError) -> bool:
    """A `wait_for_*` loop polls on after this error: a transient one, never a 401 (after
    its replay a 401 is a credential problem)."""
    return error.retry_safe and not isinstance(error, errors.Unauthorized)


# -- polling ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Polling:
    """The pace of `wait_for_*` and `iter_events`: from `first` seconds, doubling, up to
    `longest`, with jitter."""

    first: float = 0.5
    longest: float = 10.0

    def delay(self, polls: int) -> float:
        ceiling = min(self.longest, self.first * 2**polls)
        return random.uniform(ceiling * 0.75, ceiling)
