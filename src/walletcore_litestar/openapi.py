"""The OpenAPI document and its pages: Litestar generates the document from the wire Structs
(`schemas.py`, `wallet_ops_schemas.py`); `finish_openapi` adds what the binding does outside
Litestar's parameter parsing, so the served document tells the truth.

Added: the headers the binding reads itself (`X-Request-Id`, required on the sends where it
is the idempotency key; `X-USER-ID`; `/auth`'s credentials), `X-Request-Id` on every
response, optional bodies on the endpoints that take none, each body's rules across fields
(`Body.schema_extra`), and `additionalProperties: false` on every object: a body with an
unknown field is a 400, and no answer carries a field the document does not name. What names
assets (ids, decimal places, chains) is rewritten for the catalog the container serves
(`describe_catalog`).

Served: the JSON at `/schema/openapi.json`, an interactive page (Scalar) at `/schema`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from litestar._openapi.schema_generation import SchemaCreator
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, ScalarRenderPlugin
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
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition

import walletcore
from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore_litestar.schemas import ChainAddresses, address_order
from walletcore_litestar.wire import (
    ASSET_ID_STRING_PATTERN,
    DOCUMENTED,
    HEX_ID_PATTERN,
    MAX_REQUEST_ID_CHARS,
    Body,
    DecimalsRule,
    amount_pattern,
    asset_id_string_pattern,
)

SCHEMA_PATH = "/schema"
#: The page's script comes from a CDN (the document itself is served here); major pinned.
SCALAR_VERSION = "1"
#: Inbound: empty means absent (one is generated); else echoed as it is.
_REQUEST_ID_IN = Schema(
    type=OpenAPIType.STRING, max_length=MAX_REQUEST_ID_CHARS, pattern="^[ -~]*$"
)
#: Inbound where it is the idempotency key: required, and not blank (servers strip the
#: spaces around a header value).
_IDEMPOTENCY_KEY = Schema(
    type=OpenAPIType.STRING,
    min_length=1,
    max_length=MAX_REQUEST_ID_CHARS,
    pattern="^[!-~]([ -~]*[!-~])?$",
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
        render_plugins=[ScalarRenderPlugin(version=SCALAR_VERSION, path="/"), JsonRenderPlugin()],
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


class ChainAddressesSchema(OpenAPISchemaPlugin):
    """The schema of `ChainAddresses` (a mapping on the wire): the component
    `ChainAddresses`, an object whose properties are the chains (`chains()`, listed in
    catalog order), each an optional string; `finish_openapi` closes it
    (`additionalProperties: false`) like every object."""

    def __init__(self, chains: Callable[[], Iterable[Chain]]) -> None:
        self._chains = chains

    @staticmethod
    def is_plugin_supported_type(value: Any) -> bool:
        return value is ChainAddresses

    def to_openapi_schema(
        self, field_definition: FieldDefinition, schema_creator: SchemaCreator
    ) -> Schema:
        properties = {
            str(chain): FieldDefinition.from_annotation(str)
            for chain in address_order(self._chains())
        }
        return schema_creator.create_component_schema(
            field_definition, required=[], property_fields=properties, title="ChainAddresses"
        )


def finish_openapi(
    openapi: OpenAPI,
    *,
    catalog: Catalog,
    user_scoped: Iterable[str],
    no_body: Iterable[str],
    idempotent: Iterable[str],
) -> OpenAPI:
    user_scoped, no_body, idempotent = set(user_scoped), set(no_body), set(idempotent)
    for path, item in (openapi.paths or {}).items():
        operation = item.post
        if operation is None:
            continue
        params = [_request_id_parameter(required=path in idempotent)]
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
    for body in _subclasses(Body):
        if body.schema_extra and body.__name__ in schemas:
            for keyword, value in body.schema_extra.items():
                if isinstance(value, DecimalsRule):
                    value = value.resolve(catalog)
                setattr(schemas[body.__name__], _attribute(keyword), value)
    describe_catalog(openapi, catalog)
    for schema in schemas.values():
        _collapse_single_one_of(schema)
        if schema.type == OpenAPIType.OBJECT and schema.additional_properties is None:
            schema.additional_properties = False
    return openapi


def describe_catalog(openapi: OpenAPI, catalog: Catalog) -> OpenAPI:
    """The document of the assets `catalog` serves: the asset ids (`enum`, the digit-string
    pattern), the most decimal places of an amount, and the `Chain` names of `/config`,
    where the schemas were written for the contract's (`wire.DOCUMENTED`)."""
    if openapi.components is None:
        openapi.components = Components()
    if openapi.components.schemas is None:
        openapi.components.schemas = {}
    schemas = openapi.components.schemas
    documented_ids = list(DOCUMENTED.asset_ids)
    served_ids = list(catalog.asset_ids)
    swaps = {
        ASSET_ID_STRING_PATTERN: asset_id_string_pattern(served_ids),
        amount_pattern(DOCUMENTED.max_decimals): amount_pattern(catalog.max_decimals),
    }

    def visit(schema: Schema) -> None:
        if schema.enum is not None and list(schema.enum) == documented_ids:
            schema.enum = list(served_ids)
        if schema.pattern is not None and schema.pattern in swaps:
            schema.pattern = swaps[schema.pattern]

    for schema in list(schemas.values()):
        _walk(schema, visit)
    schemas["Chain"] = Schema(
        type=OpenAPIType.STRING, enum=[c.value for c in catalog.chains], title="Chain"
    )
    config_asset = schemas.get("ConfigAsset")
    if isinstance(config_asset, Schema) and config_asset.properties:
        config_asset.properties["chain"] = Reference(ref="#/components/schemas/Chain")
    openapi.components.schemas = dict(sorted(schemas.items()))
    return openapi


def _walk(schema: Any, visit: Any) -> None:
    """`visit` every `Schema` in `schema` and under it (properties, items, combinators)."""
    if isinstance(schema, Schema):
        visit(schema)
        for f in dataclasses.fields(schema):
            _walk(getattr(schema, f.name), visit)
    elif isinstance(schema, dict):
        for value in schema.values():
            _walk(value, visit)
    elif isinstance(schema, (list, tuple)):
        for value in schema:
            _walk(value, visit)


def _subclasses(cls: type[Body]) -> Iterator[type[Body]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _attribute(keyword: str) -> str:
    """`oneOf` -> `one_of`: the `Schema` attribute of a JSON Schema keyword."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in keyword)


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


def _request_id_parameter(*, required: bool) -> Parameter:
    if required:
        return Parameter(
            name="X-Request-Id",
            param_in="header",
            required=True,
            description="The idempotency key of this send: a retry with the same id returns "
            "the first answer and never sends twice (`400` without it). Also the correlation "
            "id, echoed in `requestId` and the `X-Request-Id` response header.",
            schema=_IDEMPOTENCY_KEY,
        )
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
        description="From a trusted gateway: the end user, overriding the body's `userId`.",
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
