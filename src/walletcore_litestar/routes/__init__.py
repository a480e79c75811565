"""The HTTP endpoints, one module per use-case group; `ROUTES` is what the plugin registers."""

from __future__ import annotations

from litestar import Router
from litestar.types import ControllerRouterHandler

from walletcore_litestar.errors import MAX_BODY_BYTES
from walletcore_litestar.routes.auth import authenticate
from walletcore_litestar.routes.events import EVENT_PATHS, EVENT_ROUTES
from walletcore_litestar.routes.market import config, prices
from walletcore_litestar.routes.operations import OPERATIONS_ROUTES
from walletcore_litestar.routes.platform import platform_addresses
from walletcore_litestar.routes.policies import POLICY_ROUTES
from walletcore_litestar.routes.trading import (
    approve,
    cancel,
    collect,
    get_trade,
    list_trades,
    order,
    sell,
)
from walletcore_litestar.routes.wallet_ops import (
    IDEMPOTENT_PATHS,
    PLATFORM_ROUTES,
    USER_PATHS,
    USER_ROUTES,
)
from walletcore_litestar.routes.wallets import addresses, create, extend
from walletcore_litestar.routes.webhooks import WEBHOOK_ROUTES
from walletcore_litestar.security import require_platform_caller, require_token

__all__ = ["IDEMPOTENT_PATHS", "NO_BODY_PATHS", "USER_SCOPED_PATHS", "build_routes"]

#: Paths on which `X-USER-ID` overrides the body's `userId`.
USER_SCOPED_PATHS = (
    "/sell",
    "/order",
    "/trade/approve",
    "/trade/collect",
    "/trade/cancel",
    "/trade",
    "/trades",
    "/extend",
    "/addresses",
    *USER_PATHS,
    *EVENT_PATHS,
)
#: Paths that take no body (an empty JSON object is accepted).
NO_BODY_PATHS = ("/prices", "/config", "/platform/addresses", "/policy")
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def build_routes() -> list[ControllerRouterHandler]:
    authenticated = Router(
        path="/",
        before_request=require_token,
        security=BEARER,
        # Set here, not only on the app: Litestar's app router ignores a plugin's value.
        request_max_body_size=MAX_BODY_BYTES,
        route_handlers=[
            prices,
            config,
            sell,
            order,
            approve,
            collect,
            cancel,
            get_trade,
            list_trades,
            create,
            extend,
            addresses,
            *USER_ROUTES,
            *EVENT_ROUTES,
            *WEBHOOK_ROUTES,
            *POLICY_ROUTES,
            Router(
                path="/platform",
                before_request=require_platform_caller,  # replaces require_token here
                route_handlers=[platform_addresses, *PLATFORM_ROUTES],
            ),
        ],
    )
    # The operations endpoints (GET, no api token, outside the document) stand apart.
    return [authenticate, authenticated, *OPERATIONS_ROUTES]
