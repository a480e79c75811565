"""OpenAPI error responses: every one is the error envelope."""

from __future__ import annotations

from litestar.openapi.datastructures import ResponseSpec

from walletcore_litestar.schemas import ErrorEnvelope

_MEANING = {
    400: "Invalid request (body, field values, headers); the message says which",
    401: "`Missing or expired token`, or `Invalid credentials` (see the message)",
    403: "Asset not enabled for the api client (permanent, do not retry)",
    404: "No such user, trade or platform wallet (see the message)",
    409: "The trade is not in a state that allows this; follow the state table",
    502: "No usable price, or `Order rejected: ...` (the trade is now failed)",
    503: "Trading unavailable for the asset; no tight-loop retry",
    504: "Timed out: nothing quoted on /sell; outcome unknown on approve (poll /trade)",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """Error envelope responses for `statuses` (400 is always possible: headers, body)."""
    wanted = sorted({400, *statuses})
    return {
        status: ResponseSpec(data_container=ErrorEnvelope, description=_MEANING[status])
        for status in wanted
    }
