"""`/prices` and `/config`: no body (an empty JSON object is accepted)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post

from walletcore_litestar.bodies import require_empty_body
from walletcore_litestar.envelope import request_id_of
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
async def prices(request: Request[Any, Any, Any]) -> PricesEnvelope:
    await require_empty_body(request)
    found = await services_of(request.app).prices_view()
    return PricesEnvelope(found, request_id_of(request.scope))


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
async def config(request: Request[Any, Any, Any]) -> ConfigEnvelope:
    await require_empty_body(request)
    found = services_of(request.app).config_view(caller_of(request).client)
    return ConfigEnvelope(found, request_id_of(request.scope))
