"""The binding as a Litestar plugin: routes, the one exception handler, OpenAPI, lifespan,
and operations (health endpoints, metrics hooked onto the adapters at start)."""

from __future__ import annotations

import logging

from dependency_injector import providers
from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.plugins import InitPluginProtocol

from walletcore.container import Container, start, stop
from walletcore.domain.assets import Chain
from walletcore_litestar.bodies import StrictRequest
from walletcore_litestar.errors import MAX_BODY_BYTES, handle_exception
from walletcore_litestar.instrument import instrument
from walletcore_litestar.limits import pin_recursion_limit, preload_chain_libraries
from walletcore_litestar.metrics import PrometheusObserver
from walletcore_litestar.openapi import ChainAddressesSchema, openapi_config
from walletcore_litestar.operations import OperationsSettings
from walletcore_litestar.routes import build_routes
from walletcore_litestar.services import OPERATIONS_KEY, STATE_KEY, Operations, Services
from walletcore_litestar.tokens import CachingTokenSigner


class WalletcorePlugin(InitPluginProtocol):
    """Registers the walletcore HTTP API on a Litestar app built around `container`."""

    def __init__(
        self,
        container: Container,
        *,
        operations: OperationsSettings | None = None,
        observer: PrometheusObserver | None = None,
    ) -> None:
        self.container = container
        self.operations = Operations(
            operations or OperationsSettings(), observer or PrometheusObserver()
        )
        # each readiness check's time limit (WALLETCORE_HEALTH_TIMEOUT_SECONDS)
        container.health.add_kwargs(timeout_seconds=self.operations.settings.health_timeout_seconds)
        if not container.token_signer.overridden:
            # Same key, same answers; a token verified once is not re-verified (tokens.py).
            container.token_signer.override(
                providers.Singleton(CachingTokenSigner, container.token_key)
            )

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.route_handlers.extend(build_routes())
        # The one mapping: domain errors and framework errors alike become the envelope.
        app_config.exception_handlers[Exception] = handle_exception
        app_config.state[STATE_KEY] = Services(self.container)
        app_config.state[OPERATIONS_KEY] = self.operations
        app_config.request_max_body_size = MAX_BODY_BYTES
        # Every body is read by the one strict JSON reader (depth, UTF-8, duplicates, types).
        app_config.request_class = StrictRequest
        app_config.openapi_config = openapi_config()
        app_config.plugins.append(ChainAddressesSchema(self._address_chains))
        app_config.on_startup.append(self._start)
        app_config.on_shutdown.append(self._stop)
        return app_config

    def _address_chains(self) -> list[Chain]:
        """The chains a wallet can hold an address on: the served catalog's."""
        return list(self.container.catalog().chains)

    async def _start(self, app: Litestar) -> None:
        preload_chain_libraries()
        await start(self.container)
        app.state[STATE_KEY].warm_up()
        instrument(self.container, self.operations.observer)
        self.operations.observer.worker_started()
        pin_recursion_limit()

    async def _stop(self, _: Litestar) -> None:
        await self.container.auth().failures.settled()  # refused /auth not written yet
        await stop(self.container)
        # A server's worker may end without the interpreter's exit (multiprocessing ends a
        # forked worker with os._exit): write the log lines still batched now.
        for handler in logging.getLogger("walletcore").handlers:
            handler.flush()
