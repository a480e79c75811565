"""The app factory: `create_app()` for servers (`--factory`), `create_app(container)` for tests."""

from __future__ import annotations

from litestar import Litestar

from walletcore.container import Container, create_container
from walletcore_litestar.metrics import PrometheusObserver
from walletcore_litestar.middleware import RequestContextMiddleware
from walletcore_litestar.openapi import finish_openapi
from walletcore_litestar.operations import OperationsSettings
from walletcore_litestar.plugin import WalletcorePlugin
from walletcore_litestar.routes import IDEMPOTENT_PATHS, NO_BODY_PATHS, USER_SCOPED_PATHS


def create_app(
    container: Container | None = None, *, operations: OperationsSettings | None = None
) -> Litestar:
    """A Litestar app serving the walletcore API on `container` (default: from settings);
    `operations`: the health, metrics and log settings (default: from `WALLETCORE_*`)."""
    if container is None:
        container = create_container()
    observer = PrometheusObserver()
    operations = operations or OperationsSettings()
    plugin = WalletcorePlugin(container, operations=operations, observer=observer)
    app = Litestar(plugins=[plugin], logging_config=None, debug=False)
    finish_openapi(
        app.openapi_schema,
        catalog=container.catalog(),
        user_scoped=USER_SCOPED_PATHS,
        no_body=NO_BODY_PATHS,
        idempotent=IDEMPOTENT_PATHS,
    )
    # Outermost, around routing too: unknown paths and wrong methods get the request id.
    app.asgi_handler = RequestContextMiddleware(
        app.asgi_handler, observer, body_timeout_seconds=operations.body_timeout_seconds
    )
    return app
