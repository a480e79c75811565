"""The response envelope: `{result, requestId}` on success, `{message, error, requestId}` on error.

The shapes are `wire.Envelope` (each operation narrows `result`) and `wire.ErrorEnvelope`;
this module holds the request id they carry and encodes the errors answered outside Litestar.
"""

from __future__ import annotations

from typing import Any

import msgspec

from walletcore.domain.ids import new_id
from walletcore_litestar.wire import ErrorEnvelope

#: Where the request id lives in the ASGI scope's state (set by `RequestContextMiddleware`).
REQUEST_ID_KEY = "walletcore_request_id"

_encoder = msgspec.json.Encoder()


def request_id_of(scope: Any) -> str:
    """The request id of this connection; generated (and kept) if the middleware did not run."""
    state = scope.setdefault("state", {})
    rid = state.get(REQUEST_ID_KEY)
    if rid is None:
        rid = state[REQUEST_ID_KEY] = new_id()
    return str(rid)


def error_body(status: int, message: str, request_id: str) -> ErrorEnvelope:
    return ErrorEnvelope(message, str(status), request_id)


def encode_error(status: int, message: str, request_id: str) -> bytes:
    return _encoder.encode(error_body(status, message, request_id))
