"""OpenAPI error responses: every one is the error envelope, with an example that is one."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example

from walletcore.domain import errors as e
from walletcore_litestar.errors import INTERNAL
from walletcore_litestar.wire import Envelope, ErrorEnvelope

#: Status: (what it means, an example message). Trading, market, wallets, auth.
GENERAL: Mapping[int, tuple[str, str]] = {
    400: (
        "Invalid request (body, field values, headers); the message says which",
        "Invalid request: tradeId is required",
    ),
    401: (
        "`Missing or expired token`, or `Invalid credentials` (see the message)",
        e.MissingOrExpiredToken.default_message,
    ),
    403: (
        "Asset not enabled for the api client (permanent, do not retry)",
        e.AssetNotEnabled.default_message,
    ),
    404: (
        "No such user, trade or platform wallet (see the message)",
        e.UserNotFound.default_message,
    ),
    409: (
        "The trade is not in a state that allows this; follow the state table",
        e.TradeNotApprovable.default_message,
    ),
    500: (
        "Internal error: never expected; the outcome of a state-changing call is unknown",
        INTERNAL,
    ),
    502: (
        "No usable price, or `Order rejected: ...` (the trade is now failed)",
        e.PriceUnavailable.default_message,
    ),
    503: (
        "Trading unavailable for the asset; no tight-loop retry",
        e.TradingUnavailable.default_message,
    ),
    504: (
        "Timed out: nothing quoted on /sell; outcome unknown on approve (poll /trade)",
        e.VenueTimeout.default_message,
    ),
}

#: The wallet operations (`/balance` ... `/send`, `/platform/...`).
WALLET: Mapping[int, tuple[str, str]] = {
    **GENERAL,
    400: (
        (
            "Invalid request (body, headers, recipient address, amount, balance, Bitcoin wrong "
            "password); the message says which"
        ),
        "Invalid request: recipient is required",
    ),
    401: (
        (
            "`Missing or expired token`; on /send a wrong wallet password (`Invalid credentials` "
            "on EVM and TRON, `Invalid password` on SOLANA)"
        ),
        e.MissingOrExpiredToken.default_message,
    ),
    404: (
        (
            "No such user; no platform wallet yet; no such transaction; on Bitcoin balance, the "
            "address is unknown to the indexer"
        ),
        e.UserNotFound.default_message,
    ),
    409: (
        "A send with this X-Request-Id is still in progress; retry it later",
        e.IdempotencyConflict.default_message,
    ),
    422: (
        "This X-Request-Id was already used with a different request",
        e.IdempotencyKeyReused.default_message,
    ),
    502: (
        "The network refused the transfer; nothing was sent",
        e.TransferRejected.default_message,
    ),
    503: (
        (
            "Asset not available on this endpoint (permanent), or history unreadable now "
            "(transient); the message says which"
        ),
        e.AssetUnavailableOnEndpoint.default_message,
    ),
    504: (
        (
            "Broadcast outcome unknown: retry with the same X-Request-Id (the same transaction "
            "is sent again, never a new one)"
        ),
        e.BroadcastTimeout.default_message,
    ),
}

#: The example envelopes' request id.
EXAMPLE_REQUEST_ID = "5f0c6e2a9b1d4c3e8f7a6b5c"


def errors(
    *statuses: int,
    table: Mapping[int, tuple[str, str]] = GENERAL,
    examples: Mapping[int, str] | None = None,
    meanings: Mapping[int, str] | None = None,
) -> dict[int, ResponseSpec]:
    """Error envelope responses for `statuses`; 400 (headers, body) and 500 are always
    possible. `examples` and `meanings` replace the table's for this operation."""
    responses = {}
    for status in sorted({400, 500, *statuses}):
        meaning, message = table[status]
        meaning = (meanings or {}).get(status, meaning)
        message = (examples or {}).get(status, message)
        example = ErrorEnvelope(message, str(status), EXAMPLE_REQUEST_ID)
        responses[status] = ResponseSpec(
            data_container=ErrorEnvelope,
            # the example is ours; Litestar's generated ones are random strings, which
            # would make every app's document differ from the next
            generate_examples=False,
            description=meaning,
            examples=[Example(summary=message, value=msgspec.to_builtins(example))],
        )
    return responses


def accepted(envelope: type[Envelope], meaning: str) -> ResponseSpec:
    """The `202` of an operation that can answer one (a send held for approval): its
    envelope, without a generated example (the document stays the same from app to app)."""
    return ResponseSpec(data_container=envelope, generate_examples=False, description=meaning)
