"""Running the app under an ASGI server: granian (default, measured faster here) or uvicorn.

Workers are separate processes, each importing `app_factory`; they share state only
through the storage (the database: SQLite or PostgreSQL), and their metrics through
prometheus-client's multiprocess directory, made by `run` before they start.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
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
#: Set by `run` for granian's worker processes (they inherit it): see `ignore_sigint`.
GRANIAN_WORKER_ENV = "_WALLETCORE_GRANIAN_WORKER"


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


def dump_stacks_on_sigusr1() -> None:
    """`kill -USR1 <worker pid>` writes every thread's Python stack to the worker's stderr
    (the stdlib's faulthandler, in C: it answers even when the event loop is stuck), for
    an operator asking why a worker does not answer or does not stop. Nothing else is
    printed: no locals, so no secret."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)


def ignore_sigint() -> None:
    """A granian worker stops on its main process's SIGTERM only: SIGINT is blocked in all
    its threads (this runs in the worker's one thread, before granian's runtime starts its
    own, which inherit the mask).

    Why: granian (2.8) hands a worker's SIGINT or SIGTERM to a channel of one slot that
    nothing reads until the worker serves, and it does so on the event loop's thread; a
    second signal before then blocks that thread for good. Ctrl-C in a terminal signals
    the whole process group, and the main process then sends each worker SIGTERM: two
    signals, so a worker still starting hung, and `walletcore serve` with it (seen here:
    most of the runs signalled within a second of the start). With SIGINT blocked, each
    worker gets one signal, its main process's SIGTERM. Signal only the main process
    (docs/deploy.md): SIGTERM sent to a worker as well is still a second signal."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def app_factory() -> Litestar:
    """What each server worker imports: logging set up, the app from settings, warmed up."""
    if os.environ.get(GRANIAN_WORKER_ENV) == "1":
        ignore_sigint()
    configure_logging()
    dump_stacks_on_sigusr1()
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

        os.environ[GRANIAN_WORKER_ENV] = "1"  # the workers' app_factory: ignore_sigint()
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
