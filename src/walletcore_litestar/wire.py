"""The building blocks of the wire shapes (`schemas`, `wallet_ops_schemas`): documented
field types, the patterns they share with the core's rules, and the bases of every body,
result and envelope.

`doc(...)` is schema-only metadata: Litestar writes it into the OpenAPI document, msgspec
does not enforce it, so each value's message comes from the core, in one place.

What names assets (the ids, their decimal places, the chains) is written here for the
contract's catalog (`DOCUMENTED`); `openapi.describe_catalog` rewrites it for the catalog the
app's container serves, so the document lists what the deployment serves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, ClassVar

import msgspec
from litestar.params import KwargDefinition

from walletcore.domain.assets import CONTRACT_ASSETS
from walletcore.domain.catalog import Catalog
from walletcore.services.wallets import PASSWORD_MAX_LENGTH

# -- documented constraints -----------------------------------------------------------------
#: The longest `X-Request-Id` accepted (it is written to the audit log and echoed).
MAX_REQUEST_ID_CHARS = 128
HEX_ID_PATTERN = r"^[0-9a-fA-F]{24}$"
#: An amount, balance, fee or price the service answers: plain digits, no sign or exponent.
DECIMAL_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
DATETIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$"
ERROR_STATUS_PATTERN = r"^[45][0-9]{2}$"
#: The catalog the schemas are written with (the contract's); the served one replaces it in
#: the document (`openapi.describe_catalog`).
DOCUMENTED = Catalog.of(CONTRACT_ASSETS)


def asset_id_string_pattern(ids: Iterable[int]) -> str:
    """An all-digit `assetId` naming one of `ids` (`"21"`, `"021"`)."""
    return "^0*(?:" + "|".join(str(i) for i in ids) + ")$"


#: An all-digit `assetId` naming a catalog asset, at most 9 digits.
ASSET_ID_STRING_PATTERN = asset_id_string_pattern(DOCUMENTED.asset_ids)
ASSET_ID_STRING_MAX = 9
#: The most decimal places any asset has: an amount may carry that many.
MAX_ASSET_DECIMALS = DOCUMENTED.max_decimals


def amount_pattern(places: int) -> str:
    """A plain decimal string greater than zero with at most `places` significant decimal
    places (trailing zeros are free), as `walletcore.domain.money.parse_amount` reads it."""
    return (
        rf"^(?:[0-9]*[1-9][0-9]*(?:\.[0-9]{{1,{places}}}0*)?"
        rf"|0+\.[0-9]{{0,{places - 1}}}[1-9]0*)$"
    )


def asset_ids_schema(ids: list[int]) -> dict[str, Any]:
    """JSON Schema of an `assetId` naming one of `ids`, as an integer or a digit string."""
    names = "|".join(str(i) for i in ids)
    return {"anyOf": [{"enum": ids}, {"type": "string", "pattern": f"^0*(?:{names})$"}]}


class DecimalsRule:
    """A body's rule that `field` has at most the decimal places of the asset the body
    names (`Body.schema_extra`): `decimals_rule(field, catalog)` for the served catalog."""

    def __init__(self, field: str) -> None:
        self.field = field

    def resolve(self, catalog: Catalog) -> list[dict[str, Any]]:
        return decimals_rule(self.field, catalog)


def decimals_rule(field: str, catalog: Catalog) -> list[dict[str, Any]]:
    """`field` has at most the decimal places of the asset the body names: one `if`/`then`
    per count below the largest (which the field's own pattern states)."""
    by_places: dict[int, list[int]] = {}
    for asset in catalog.assets:
        by_places.setdefault(asset.decimals, []).append(asset.id)
    return [
        {
            "if": {"required": ["assetId"], "properties": {"assetId": asset_ids_schema(ids)}},
            "then": {"properties": {field: {"pattern": amount_pattern(places)}}},
        }
        for places, ids in sorted(by_places.items())
        if places < catalog.max_decimals
    ]


class _Doc(KwargDefinition):
    """A KwargDefinition usable inside a Union (its `schema_extra` dict is not hashable)."""

    def __hash__(self) -> int:
        return id(self)


def doc(**kwargs: Any) -> KwargDefinition:
    """Schema-only metadata: Litestar puts it in OpenAPI, msgspec does not enforce it."""
    return _Doc(**kwargs)


def hiding(*secret: str) -> Callable[[Any], str]:
    """A `__repr__` that shows `secret` fields as `<hidden>` (a Struct's repr shows all)."""

    def __repr__(self: Any) -> str:
        shown = (
            f"{name}=<hidden>" if name in secret else f"{name}={getattr(self, name)!r}"
            for name in self.__struct_fields__
        )
        return f"{type(self).__name__}({', '.join(shown)})"

    return __repr__


# Outbound values.
HexId = Annotated[str, doc(pattern=HEX_ID_PATTERN, description="24-character hex id")]
DecimalString = Annotated[
    str, doc(pattern=DECIMAL_PATTERN, description='a decimal string, e.g. "1.5"')
]
DateTime = Annotated[
    str, doc(pattern=DATETIME_PATTERN, description="ISO 8601 UTC with milliseconds and Z")
]
AssetIdNumber = Annotated[
    int,
    doc(schema_extra={"enum": list(DOCUMENTED.asset_ids)}, description="asset id (see /config)"),
]
RequestId = Annotated[
    str,
    doc(
        min_length=1,
        max_length=MAX_REQUEST_ID_CHARS,
        description="the X-Request-Id echoed, or generated",
    ),
]

# Inbound values: what the core accepts, as documentation.
AssetIdString = Annotated[
    str,
    doc(
        pattern=ASSET_ID_STRING_PATTERN,
        max_length=ASSET_ID_STRING_MAX,
        description="the same asset id as an all-digit string, normalised to an integer",
    ),
]
AssetIdIn = AssetIdNumber | AssetIdString
UserIdIn = Annotated[
    str,
    doc(
        pattern=HEX_ID_PATTERN,
        description="The end user (24 hex; upper case is accepted). Optional here because "
        "the X-USER-ID header can carry it instead (the header wins); one of the two is "
        "required, else `400 userId is required`.",
    ),
]
PasswordIn = Annotated[
    str,
    doc(
        min_length=1,
        max_length=PASSWORD_MAX_LENGTH,
        description="the wallet password chosen at /create; never stored",
    ),
]


# -- request bodies --------------------------------------------------------------------------
class Body(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A request body. An unknown field is a 400: on a money API a misspelt optional field
    (`fiatamount`) must not be silently dropped."""

    #: JSON Schema keywords for rules across fields, added to this body's schema (a
    #: `DecimalsRule` is resolved for the served catalog).
    schema_extra: ClassVar[dict[str, Any]] = {}


# -- results ---------------------------------------------------------------------------------
class Result(msgspec.Struct, gc=False):
    """A result payload (no reference cycles: not tracked by the garbage collector)."""


# -- envelopes -------------------------------------------------------------------------------
class Envelope(msgspec.Struct, gc=False):
    """`{result, requestId}`: each operation's envelope narrows `result`."""

    result: Any
    requestId: RequestId


class ErrorEnvelope(msgspec.Struct, gc=False):
    message: Annotated[str, doc(description="safe to show; never a secret or internal detail")]
    error: Annotated[str, doc(pattern=ERROR_STATUS_PATTERN, description="the HTTP status")]
    requestId: RequestId
