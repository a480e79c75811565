"""Who is calling: the bearer-token guard, the `Caller`, and the `X-USER-ID` rules."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection

from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest, MissingOrExpiredToken, UserHeaderNotAllowed
from walletcore.domain.wire import JsonValue
from walletcore.services.context import Caller
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.services import services_of

CLIENT_KEY = "walletcore_client"
USER_HEADER = "x-user-id"


# These run as `before_request` hooks rather than guards: Litestar copies the route handler
# for every guard call (~25 us a request), and a hook runs at the same point, before the body
# is read, so an unauthenticated caller learns nothing from validation errors.


async def require_token(request: Request[Any, Any, Any]) -> None:
    """Every endpoint but `/auth`: `401 Missing or expired token` without a valid token;
    `Authorization` sent twice is a 400 (which of the two counts would be the server's
    choice, and a proxy may pick the other)."""
    auth = services_of(request.app).auth
    client = await auth.verify(single_header(request.scope["headers"], b"authorization"))
    request.scope["state"][CLIENT_KEY] = client


async def require_platform_caller(request: Request[Any, Any, Any]) -> None:
    """The platform endpoints: a valid token, and no `X-USER-ID` (they act for the api
    client, never for a user: a 400)."""
    await require_token(request)
    if _header(request, USER_HEADER.encode()) is not None:
        raise UserHeaderNotAllowed()


async def require_client_caller(request: Request[Any, Any, Any]) -> None:
    """The api client's own endpoints (`/policy`, `/approvals`): as the platform ones, a
    valid token and no `X-USER-ID` (a 400)."""
    await require_token(request)
    if _header(request, USER_HEADER.encode()) is not None:
        raise UserHeaderNotAllowed(
            "X-USER-ID is not accepted here: this endpoint is the api client's, not a user's"
        )


def _header(request: Request[Any, Any, Any], name: bytes) -> str | None:
    """The first value of a header, read from the raw scope (cheaper than `Headers`)."""
    for key, value in request.scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def single_header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The value of a header that identifies the caller, None when absent; sent more than
    once, a 400 naming it (`Authorization`, `x-client-id`, `x-api-key`)."""
    found: bytes | None = None
    for key, value in headers:
        if key == name:
            if found is not None:
                raise InvalidRequest(f"{_HEADER_NAMES.get(name, name.decode())} must be sent once")
            found = value
    return None if found is None else found.decode("latin-1")


#: How a header is named in messages (the scope holds lower-case names).
_HEADER_NAMES = {b"authorization": "Authorization"}


def caller_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    client: ApiClient | None = connection.scope["state"].get(CLIENT_KEY)
    if client is None:  # a route registered without the guard: fail closed
        raise MissingOrExpiredToken()
    given = any(k == b"x-request-id" and v for k, v in connection.scope["headers"])
    return Caller(client, request_id_of(connection.scope), request_id_given=given)


def user_id_of(
    connection: ASGIConnection[Any, Any, Any, Any], body_user_id: JsonValue
) -> JsonValue:
    """`X-USER-ID`, when present, overrides the body's `userId` (sent twice: a 400)."""
    values = connection.headers.getall(USER_HEADER, [])
    if not values:
        return body_user_id
    if len(values) > 1:
        raise InvalidRequest("X-USER-ID must be sent once")
    return values[0].strip()
