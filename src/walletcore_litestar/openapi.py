"""The OpenAPI document: Litestar generates it; `finish_openapi` adds what the binding does
outside Litestar's parameter parsing, so the served document tells the truth.

Added: the headers the binding reads itself (`X-Request-Id`, `X-USER-ID`, `/auth`'s
credentials), `X-Request-Id` on every response, `additionalProperties: false` on request
bodies (unknown fields are a 400), and optional bodies on the endpoints that take none.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import (
    Components,
    OpenAPI,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Parameter,
    Reference,
    RequestBody,
    Schema,
    SecurityScheme,
)

import walletcore
from walletcore_litestar.middleware import MAX_REQUEST_ID_CHARS
from walletcore_litestar.schemas import HEX_ID_PATTERN
from walletcore_litestar.wallet_ops_schemas import REQUEST_BODY_SCHEMAS as WALLET_OPS_BODIES

SCHEMA_PATH = "/schema"
REQUEST_BODY_SCHEMAS = (
    "QuoteRequest",
    "TradeRequest",
    "TradesRequest",
    "CreateWalletRequest",
    "ExtendWalletRequest",
    "UserRequest",
    "ChainAddresses",
    *WALLET_OPS_BODIES,
)
#: Inbound: empty means absent (one is generated); else echoed as it is.
_REQUEST_ID_IN = Schema(
    type=OpenAPIType.STRING, max_length=MAX_REQUEST_ID_CHARS, pattern="^[ -~]*$"
)
#: Outbound: never empty.
_REQUEST_ID_OUT = Schema(
    type=OpenAPIType.STRING, min_length=1, max_length=MAX_REQUEST_ID_CHARS, pattern="^[ -~]+$"
)


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="walletcore",
        version=walletcore.__version__,
        description=(
            "Multi-chain custodial wallet service. Every endpoint is POST + JSON; every "
            "response is an envelope carrying `requestId`. Interface version 1.0.0."
        ),
        path=SCHEMA_PATH,
        render_plugins=[JsonRenderPlugin()],
        components=Components(
            security_schemes={
                "bearer": SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="The token from /auth, valid 15 minutes",
                )
            }
        ),
        create_examples=False,
    )


def finish_openapi(
    openapi: OpenAPI, *, user_scoped: Iterable[str], no_body: Iterable[str]
) -> OpenAPI:
    user_scoped, no_body = set(user_scoped), set(no_body)
    for path, item in (openapi.paths or {}).items():
        operation = item.post
        if operation is None:
            continue
        params = [_request_id_parameter()]
        if path in user_scoped:
            params.append(_user_header_parameter())
        if path == "/auth":
            params += [
                _credential("x-client-id", "the api client id"),
                _credential("x-api-key", "the api key"),
            ]
        operation.parameters = [*(operation.parameters or []), *params]
        if path in no_body:
            operation.request_body = _empty_body()
        _add_response_header(operation)
    schemas = openapi.components.schemas if openapi.components else {}
    for name in REQUEST_BODY_SCHEMAS:
        if name in schemas:
            schemas[name].additional_properties = False
    for schema in schemas.values():
        _collapse_single_one_of(schema)
    return openapi


def _empty_body() -> RequestBody:
    """What `bodies.require_empty_body` accepts: no body, `{}` or `null`."""
    empty_object = Schema(
        type=OpenAPIType.OBJECT, properties={}, additional_properties=False, title="EmptyBody"
    )
    return RequestBody(
        required=False,
        description="No body; an empty JSON object is accepted.",
        content={
            "application/json": OpenAPIMediaType(
                schema=Schema(one_of=[empty_object, Schema(type=OpenAPIType.NULL)])
            )
        },
    )


def _request_id_parameter() -> Parameter:
    return Parameter(
        name="X-Request-Id",
        param_in="header",
        required=False,
        description="Correlation id, echoed in `requestId` and the `X-Request-Id` response "
        "header; generated when absent or empty.",
        schema=_REQUEST_ID_IN,
    )


def _user_header_parameter() -> Parameter:
    return Parameter(
        name="X-USER-ID",
        param_in="header",
        required=False,
        description="From a trusted gateway: overrides the body's `userId`.",
        schema=Schema(type=OpenAPIType.STRING, pattern=HEX_ID_PATTERN),
    )


def _credential(name: str, description: str) -> Parameter:
    return Parameter(
        name=name,
        param_in="header",
        required=True,
        description=description,
        schema=Schema(type=OpenAPIType.STRING),
    )


def _add_response_header(operation: Operation) -> None:
    for response in (operation.responses or {}).values():
        if isinstance(response, OpenAPIResponse):
            headers = dict(response.headers or {})
            headers["X-Request-Id"] = OpenAPIHeader(
                schema=_REQUEST_ID_OUT, required=True, description="The request id"
            )
            response.headers = headers


def _collapse_single_one_of(schema: Schema | Reference) -> None:
    """`{oneOf: [X]}` (msgspec's `str | UNSET`) reads as X."""
    if not isinstance(schema, Schema):
        return
    for prop_name, prop in list((schema.properties or {}).items()):
        if isinstance(prop, Schema) and prop.one_of and len(prop.one_of) == 1:
            assert schema.properties is not None
            schema.properties[prop_name] = prop.one_of[0]
