"""`GET /health/live`, `GET /health/ready`, `GET /metrics`: for the platform running the
service (probes, Prometheus), outside the spec's POST API and its OpenAPI document.

No bearer token (the API's tokens are api clients'): they reveal no secret, never a URL, a
key or an exception's text. `/metrics` takes an operator token when
`WALLETCORE_METRICS_TOKEN` is set. No envelope: a probe reads the status code, Prometheus
the text exposition; every answer still carries `X-Request-Id` and `Cache-Control: no-store`.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import MediaType, Request, Response, get

from walletcore.domain.errors import MissingOrExpiredToken
from walletcore.services.health import Readiness
from walletcore_litestar.metrics import CONTENT_TYPE
from walletcore_litestar.operations import LIVE_PATH, METRICS_PATH, READY_PATH
from walletcore_litestar.services import operations_of, services_of

NO_STORE = {"Cache-Control": "no-store"}


@get(LIVE_PATH, include_in_schema=False, sync_to_thread=False)
def live() -> Response[dict[str, str]]:
    """The process answers; nothing else is checked (a restart would not fix a node)."""
    return Response({"status": "ok"}, media_type=MediaType.JSON, headers=NO_STORE)


@get(READY_PATH, include_in_schema=False)
async def ready(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """200 when every check passes, else 503; the body lists each check."""
    readiness = await services_of(request.app).health.readiness()
    return Response(
        readiness_body(readiness),
        status_code=200 if readiness.ready else 503,
        media_type=MediaType.JSON,
        headers=NO_STORE,
    )


@get(METRICS_PATH, include_in_schema=False)
async def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The Prometheus text exposition of every worker of this service."""
    operations = operations_of(request.app)
    token = operations.settings.metrics_token
    if token is not None and not _bearer_is(request, token.get_secret_value()):
        raise MissingOrExpiredToken()
    health = services_of(request.app).health
    operations.observer.prices(await health.price_ages(), health.max_price_age_seconds)
    pending = await health.pending_sends()  # read at the scrape: any process can answer
    if pending is not None:
        operations.observer.sends_pending(pending)
    return Response(operations.observer.exposition(), media_type=CONTENT_TYPE, headers=NO_STORE)


def readiness_body(readiness: Readiness) -> dict[str, Any]:
    checks: dict[str, dict[str, Any]] = {}
    for check in readiness.checks:
        shown: dict[str, Any] = {"status": check.status.value}
        if check.error is not None:
            shown["error"] = check.error
        if check.seconds:
            shown["durationMs"] = round(check.seconds * 1000.0, 2)
        if check.name == "prices" and readiness.oldest_price_age is not None:
            shown["oldestAgeSeconds"] = round(readiness.oldest_price_age, 3)
            shown["maxAgeSeconds"] = readiness.max_price_age_seconds
        checks[check.name] = shown
    return {"status": "ok" if readiness.ready else "unavailable", "checks": checks}


def _bearer_is(request: Request[Any, Any, Any], token: str) -> bool:
    sent = request.headers.getall("authorization", [])
    if len(sent) != 1:  # none, or twice (never the first of two: the API's rule too)
        return False
    given = sent[0]
    scheme, _, value = given.partition(" ")
    # Headers arrive decoded as latin-1: compared as the bytes that were sent.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        value.strip().encode("latin-1"), token.encode("utf-8")
    )


OPERATIONS_ROUTES = [live, ready, metrics]
