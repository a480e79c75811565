"""Endpoints that take no body: accept none, `{}` or `null`, refuse anything else (a 400).

Checked by hand rather than through a `data` parameter, because these are the hottest
routes (`/prices`, `/config`) and most calls carry no body at all: the body is read only
when the headers announce one. OpenAPI documents it (see `openapi.finish_openapi`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from litestar import Request

from walletcore.domain.errors import InvalidRequest

NOT_JSON = "Request body is not valid JSON"
NOT_AN_OBJECT = "Invalid request: the body must be a JSON object"


def _announces_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-length" and value.strip() not in (b"0", b""):
            return True
        if name == b"transfer-encoding":
            return True
    return False


async def require_empty_body(request: Request[Any, Any, Any]) -> None:
    if not _announces_body(request.scope["headers"]):
        return
    body = await request.body()  # honours the body size cap
    if not body.strip():
        return
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise InvalidRequest(NOT_JSON) from None
    if value is None or value == {}:
        return
    if isinstance(value, dict):
        raise InvalidRequest(f"Invalid request: unknown field `{next(iter(value))}`")
    raise InvalidRequest(NOT_AN_OBJECT)
