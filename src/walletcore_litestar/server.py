"""Running the app under an ASGI server: granian (default, measured faster here) or uvicorn.

Workers are separate processes, each importing `app_factory`; they share state only
through the storage (the database: SQLite or PostgreSQL).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import Any, Literal

from litestar import Litestar

from walletcore_litestar.app import create_app
from walletcore_litestar.logs import BatchingStderrHandler
from walletcore_litestar.services import services_of

APP_FACTORY = "walletcore_litestar.server:app_factory"
LOG_LEVEL_ENV = "WALLETCORE_LOG_LEVEL"
Server = Literal["granian", "uvicorn"]
SERVERS: tuple[Server, ...] = ("granian", "uvicorn")
#: Seconds granian waits before replacing a worker that died.
RESPAWN_INTERVAL_SECONDS = 1.0


def configure_logging(level: str | None = None) -> None:
    """One batching stderr handler on the `walletcore` logger (request log, warnings, errors)."""
    name = (level or os.environ.get(LOG_LEVEL_ENV) or "info").upper()
    logger = logging.getLogger("walletcore")
    if not any(isinstance(h, BatchingStderrHandler) for h in logger.handlers):
        logger.addHandler(BatchingStderrHandler(sys.stderr.fileno()))
    logger.setLevel(name)
    logger.propagate = False


def app_factory() -> Litestar:
    """What each server worker imports: logging set up, the app from settings, warmed up."""
    configure_logging()
    app = create_app()
    services_of(app).warm_up()
    # Everything built so far (app, OpenAPI document, imported chain libraries) lives as
    # long as the worker: keep it out of the collector's full passes, whose pauses
    # otherwise show in p99.
    gc.collect()
    gc.freeze()
    return app


def run(
    *, host: str, port: int, workers: int, server: Server = "granian", log_level: str = "info"
) -> None:
    os.environ[LOG_LEVEL_ENV] = log_level
    if server == "granian":
        from granian import Granian
        from granian.constants import Interfaces

        Granian(
            APP_FACTORY,
            address=host,
            port=port,
            interface=Interfaces.ASGI,
            workers=workers,
            factory=True,
            log_access=False,
            log_level=_granian_level(log_level),
            # A worker that dies (a native crash, an OOM kill) is replaced; the others and
            # the listening socket stay up, so one request cannot take the service down.
            respawn_failed_workers=True,
            respawn_interval=RESPAWN_INTERVAL_SECONDS,
        ).serve()
    else:
        import uvicorn

        uvicorn.run(
            APP_FACTORY,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            access_log=False,
            log_level=log_level,
            lifespan="on",
        )


def _granian_level(level: str) -> Any:
    from granian.log import LogLevels

    return LogLevels(level.lower())
