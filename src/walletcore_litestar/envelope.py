"""The response envelope: `{result, requestId}` on success, `{message, error, requestId}` on error."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response

from walletcore.domain.ids import new_id

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


def ok(request: Request[Any, Any, Any], result: Any) -> Response[Any]:
    """A 200 success envelope."""
    return Response(content={"result": result, "requestId": request_id_of(request.scope)})


def error_body(status: int, message: str, request_id: str) -> dict[str, str]:
    return {"message": message, "error": str(status), "requestId": request_id}


def encode_error(status: int, message: str, request_id: str) -> bytes:
    return _encoder.encode(error_body(status, message, request_id))
