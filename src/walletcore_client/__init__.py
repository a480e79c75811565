"""The Python client of the walletcore HTTP API (docs/client.md): `Client` (blocking) and
`AsyncClient` (asyncio), one method per operation, typed results (`models`) and one
exception class per status (`errors`). It needs only httpx."""

from __future__ import annotations

from . import errors, models
from ._async import AsyncClient
from ._core import Polling, RetryPolicy
from ._sync import Client
from .errors import (
    BadGateway,
    BadRequest,
    Conflict,
    CursorExpired,
    Forbidden,
    GatewayTimeout,
    IdempotencyKeyReused,
    InternalError,
    InvalidCredentials,
    NotFound,
    OrderRejected,
    ServiceUnavailable,
    TokenExpired,
    TransportError,
    Unauthorized,
    UnknownCursor,
    WaitTimeout,
    WalletcoreError,
)
from .models import HeldSend, SendResult, Trade

__all__ = [
    "AsyncClient",
    "BadGateway",
    "BadRequest",
    "Client",
    "Conflict",
    "CursorExpired",
    "Forbidden",
    "GatewayTimeout",
    "HeldSend",
    "IdempotencyKeyReused",
    "InternalError",
    "InvalidCredentials",
    "NotFound",
    "OrderRejected",
    "Polling",
    "RetryPolicy",
    "SendResult",
    "ServiceUnavailable",
    "TokenExpired",
    "Trade",
    "TransportError",
    "Unauthorized",
    "UnknownCursor",
    "WaitTimeout",
    "WalletcoreError",
    "errors",
    "models",
]
