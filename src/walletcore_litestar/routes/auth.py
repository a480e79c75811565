"""`/auth`: api credentials in, a 15-minute bearer token out."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.datastructures import CacheControlHeader

from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import AuthEnvelope, AuthResult
from walletcore_litestar.security import single_header
from walletcore_litestar.services import services_of


@post(
    "/auth",
    status_code=200,
    summary="Obtain a bearer token",
    description=(
        "Headers `x-client-id` and `x-api-key`; no body, no `Authorization`. The token lasts "
        "15 minutes; there is no refresh: call /auth again. `401 Invalid credentials` for a "
        "wrong client id or api key (or a disabled client); `400` when either header is sent "
        "twice."
    ),
    responses=errors(401, examples={401: "Invalid credentials"}),
    cache_control=CacheControlHeader(no_store=True),
    security=[],
    tags=["auth"],
)
async def authenticate(request: Request[Any, Any, Any]) -> AuthEnvelope:
    request_id = request_id_of(request.scope)
    headers = request.scope["headers"]
    client_id = single_header(headers, b"x-client-id")  # twice: a 400, as Authorization
    api_key = single_header(headers, b"x-api-key")
    issued = await services_of(request.app).auth.authenticate(client_id, api_key, request_id)
    return AuthEnvelope(AuthResult.of(issued), request_id)
