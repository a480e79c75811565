"""The event feed (`/events`) and the client's deposits (`/deposits`): additions to the
contract, read by cursor; nothing here changes state (docs/events.md)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from walletcore.domain import errors as e
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.events_schemas import (
    DepositsEnvelope,
    DepositsRequest,
    DepositView,
    EventPageView,
    EventsEnvelope,
    EventsRequest,
)
from walletcore_litestar.routes._docs import GENERAL, errors
from walletcore_litestar.security import caller_of, user_id_of
from walletcore_litestar.services import services_of

_FEED = {
    **GENERAL,
    400: (
        "Invalid request: a malformed cursor, a cursor this feed never gave, a bad limit",
        "Invalid cursor: after must be an event id from this feed",
    ),
    404: ("No such user (a userId filter)", e.UserNotFound.default_message),
    410: (
        (
            "The cursor is older than the events kept (the retention): read from the "
            "start (no `after`) and reconcile"
        ),
        e.CursorExpired.default_message,
    ),
}


@post(
    "/events",
    status_code=200,
    summary="Read the event feed after a cursor",
    description=(
        "The api client's events in order, oldest first: deposits seen, confirmed or "
        "reversed, sends pending, succeeded, failed or replaced, trades approved, completed, "
        "failed, expired or cancelled. Pass the last event id you processed as `after` (none: "
        "from the oldest kept) and store `next`; reading on from it you miss no event and see "
        "none twice. `userId` (or `X-USER-ID`) keeps one user's. `hasMore`: read again at "
        "once; else poll with backoff, or take the same events as signed webhooks."
    ),
    responses=errors(401, 404, 410, table=_FEED),
    tags=["events"],
)
async def read_events(
    request: Request[Any, Any, Any], data: JSONBody[EventsRequest]
) -> EventsEnvelope:
    services = services_of(request.app)
    page = await services.events.read(
        caller_of(request),
        after=data.after,
        limit=data.limit,
        user_id=user_id_of(request, data.userId),
    )
    return EventsEnvelope(EventPageView.of(page, data.after), request_id_of(request.scope))


@post(
    "/deposits",
    status_code=200,
    summary="The deposits found on chain, newest first",
    description=(
        "Every credit found to the client's wallets (a user's with `userId` or `X-USER-ID`; "
        "else every user's and the platform wallet's): `seen` (mempool, or a block not yet "
        "deep enough), `confirmed` at the chain's depth, or `reversed` by a reorg."
    ),
    responses=errors(401, 404, table=_FEED),
    tags=["events"],
)
async def list_deposits(
    request: Request[Any, Any, Any], data: JSONBody[DepositsRequest]
) -> DepositsEnvelope:
    services = services_of(request.app)
    found = await services.events.deposits(
        caller_of(request), user_id=user_id_of(request, data.userId), limit=data.limit
    )
    catalog = services.catalog
    views = []
    for deposit in found:
        asset = catalog.get(deposit.asset_id)
        views.append(DepositView.of(deposit, asset.decimals if asset is not None else 0))
    return DepositsEnvelope(views, request_id_of(request.scope))


EVENT_ROUTES = [read_events, list_deposits]
EVENT_PATHS = ("/events", "/deposits")

__all__ = ["EVENT_PATHS", "EVENT_ROUTES"]
