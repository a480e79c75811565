"""`/prices` and `/config`: no body (an empty JSON object is accepted)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post

from walletcore_litestar.bodies import require_empty_body
from walletcore_litestar.envelope import ok
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import ConfigEnvelope, PricesEnvelope
from walletcore_litestar.security import caller_of
from walletcore_litestar.services import services_of


@post(
    "/prices",
    status_code=200,
    summary="Indicative fiat prices per coin symbol",
    description=(
        "Symbol to `{USD, EUR, GBP, CAD}` numbers, refreshed in the background and typically "
        "minutes old; indicative only. A fiat with no recorded quote reads as 0."
    ),
    responses=errors(401),
    tags=["market"],
)
async def prices(request: Request[Any, Any, Any]) -> Response[PricesEnvelope]:
    await require_empty_body(request)
    return ok(request, await services_of(request.app).market.prices())


@post(
    "/config",
    status_code=200,
    summary="The api client's enabled assets and fee payer",
    description=(
        "Every asset the api client is enabled for, in catalog order, less those limited on "
        "this environment. Top-level `feePayer` is PLATFORM when any listed asset is PLATFORM."
    ),
    responses=errors(401),
    tags=["market"],
)
async def config(request: Request[Any, Any, Any]) -> Response[ConfigEnvelope]:
    await require_empty_body(request)
    return ok(request, services_of(request.app).config_view(caller_of(request).client))
