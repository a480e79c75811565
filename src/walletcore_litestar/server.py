"""Running the app under an ASGI server: granian (default, measured faster here) or uvicorn.

Workers are separate processes, each importing `app_factory`; they share state only
through the storage (the database: SQLite or PostgreSQL), and their metrics through
prometheus-client's multiprocess directory, made by `run` before they start.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import Any, Literal

from litestar import Litestar

from walletcore_litestar.app import create_app
from walletcore_litestar.logs import BatchingStderrHandler, JsonFormatter, RequestIdFilter
from walletcore_litestar.metrics import multiprocess_directory
from walletcore_litestar.operations import OperationsSettings
from walletcore_litestar.services import services_of

APP_FACTORY = "walletcore_litestar.server:app_factory"
LOG_LEVEL_ENV = "WALLETCORE_LOG_LEVEL"
Server = Literal["granian", "uvicorn"]
SERVERS: tuple[Server, ...] = ("granian", "uvicorn")
#: Seconds granian waits before replacing a worker that died.
RESPAWN_INTERVAL_SECONDS = 1.0


def configure_logging(level: str | None = None, log_format: str | None = None) -> None:
    """One batching stderr handler on the `walletcore` logger (request log, warnings,
    errors); `log_format` `json` (default: `WALLETCORE_LOG_FORMAT`) makes its lines JSON
    objects carrying the request id."""
    name = (level or os.environ.get(LOG_LEVEL_ENV) or "info").upper()
    log_format = log_format or OperationsSettings().log_format
    logger = logging.getLogger("walletcore")
    handler = next((h for h in logger.handlers if isinstance(h, BatchingStderrHandler)), None)
    if handler is None:
        handler = BatchingStderrHandler(sys.stderr.fileno())
        logger.addHandler(handler)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
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
    with multiprocess_directory():
        _serve(host=host, port=port, workers=workers, server=server, log_level=log_level)


def _serve(*, host: str, port: int, workers: int, server: Server, log_level: str) -> None:
    json_logs = OperationsSettings().log_format == "json"
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
            log_dictconfig=_granian_json_logs() if json_logs else None,
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


def _granian_json_logs() -> dict[str, Any]:
    """granian's own lines (start, stop, worker replaced) as JSON objects too."""
    json_formatter = {"()": f"{JsonFormatter.__module__}.JsonFormatter"}
    return {
        "formatters": {"generic": json_formatter, "access": json_formatter},
        "handlers": {
            "console": {"formatter": "generic", "class": "logging.StreamHandler"},
            "access": {"formatter": "access", "class": "logging.StreamHandler"},
        },
        "loggers": {
            "_granian": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "granian.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


def _granian_level(level: str) -> Any:
    from granian.log import LogLevels

    return LogLevels(level.lower())
