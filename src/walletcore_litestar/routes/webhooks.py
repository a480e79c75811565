"""The client's webhook delivery log (`/webhooks/deliveries`, docs/events.md): what each
attempt to post its events got; nothing here changes state. The endpoint itself is the
operator's (`walletcore webhooks ...`)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import GENERAL, errors
from walletcore_litestar.security import caller_of
from walletcore_litestar.services import services_of
from walletcore_litestar.webhooks_schemas import (
    DeliveriesEnvelope,
    DeliveriesRequest,
    DeliveryView,
)

_LOG = {
    **GENERAL,
    400: (
        "Invalid request: a malformed eventId, a bad limit",
        "Invalid request: eventId must be an event id from this feed (evt_...)",
    ),
}


@post(
    "/webhooks/deliveries",
    status_code=200,
    summary="The webhook delivery log, newest first",
    description=(
        "Each attempt to post one of the client's events to its webhook endpoint: the "
        "event id (the message's `webhook-id`), the attempt's number, the HTTP status or "
        "the error, what followed (`delivered`, `retrying` at `nextAttemptAt`, `given_up`, "
        "`disabled` by a 410) and how long it took. `eventId` keeps one event's attempts. "
        "Empty when the operator set no endpoint. Never the body or the secret."
    ),
    responses=errors(401, table=_LOG),
    tags=["events"],
)
async def webhook_deliveries(
    request: Request[Any, Any, Any], data: JSONBody[DeliveriesRequest]
) -> DeliveriesEnvelope:
    services = services_of(request.app)
    found = await services.webhooks.client_deliveries(
        caller_of(request), event_id=data.eventId, limit=data.limit
    )
    return DeliveriesEnvelope([DeliveryView.of(a) for a in found], request_id_of(request.scope))


WEBHOOK_ROUTES = [webhook_deliveries]

__all__ = ["WEBHOOK_ROUTES"]
