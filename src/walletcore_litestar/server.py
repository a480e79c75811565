"""Running the app under an ASGI server: granian (default, measured faster here) or uvicorn.

Workers are separate processes, each importing `app_factory`; they share state only
through the storage (the database: SQLite or PostgreSQL), and their metrics through
prometheus-client's multiprocess directory, made by `run` before they start.
"""

from __future__ import annotations

import contextlib
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
from walletcore_litestar.memory import snapshot_memory_on_sigusr2
from walletcore_litestar.metrics import multiprocess_directory
from walletcore_litestar.operations import OperationsSettings
from walletcore_litestar.services import services_of

APP_FACTORY = "walletcore_litestar.server:app_factory"
LOG_LEVEL_ENV = "WALLETCORE_LOG_LEVEL"
Server = Literal["granian", "uvicorn"]
SERVERS: tuple[Server, ...] = ("granian", "uvicorn")
#: Seconds granian waits before replacing a worker that died.
RESPAWN_INTERVAL_SECONDS = 1.0
#: Set by `run` for granian's worker processes (they inherit it): see `ignore_sigint` and
#: `stop_signal_once`.
GRANIAN_WORKER_ENV = "_WALLETCORE_GRANIAN_WORKER"
#: Seconds a stopping granian worker has to finish what it serves before it is killed
#: (`stop_signal_once`): a stop always ends. A request cut short leaves what any crash
#: leaves (an approval stays `executing`, a send resumes from its last recovery point).
STOP_GRACE_SECONDS = 30


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
    worker gets its main process's SIGTERM; a SIGTERM sent to the workers as well (systemd's
    default stop) is dropped by `stop_signal_once`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class _WorkerStop:
    """A granian worker's stop signal, handed to granian once (`stop_signal_once`)."""

    def __init__(self) -> None:
        self.requested = False  # a SIGTERM or SIGINT came, whenever it came
        self.event: Any = None  # granian's `WorkerSignal`, once granian made it
        self.handed = False

    def signalled(self, signum: int, frame: object) -> None:
        self.requested = True
        self.hand()

    def hand(self) -> None:
        if self.requested and self.event is not None and not self.handed:
            self.handed = True
            self.event.set()


_WORKER_STOP = _WorkerStop()


def stop_signal_follows_the_fork() -> None:
    """In granian's main process right before it forks a worker (`run` registers this with
    `os.register_at_fork`): its SIGTERM handler becomes one that does in a child what a
    worker must, remember the signal for granian (`stop_signal_once`), and in the main
    process what granian's handler did. A worker forked then has it from its first
    instruction: a signal before any code of the worker runs is not lost to granian's main
    handler, which does nothing in a worker (nor can a hook after the fork be first: the
    standard library's run before it, and a signal may come while they do)."""
    current = signal.getsignal(signal.SIGTERM)
    if getattr(current, "walletcore_dispatch", False) or not callable(current):
        return
    main = os.getpid()

    def dispatch(signum: int, frame: Any) -> Any:
        if os.getpid() == main:
            return current(signum, frame)
        _WORKER_STOP.signalled(signum, frame)
        return None

    dispatch.walletcore_dispatch = True  # type: ignore[attr-defined]
    with contextlib.suppress(ValueError):  # not the main thread: `stop_signal_once` then
        signal.signal(signal.SIGTERM, dispatch)


def stop_signal_once() -> bool:
    """A granian worker stops on the first SIGTERM (or SIGINT) it gets, whenever it comes,
    and hands it to granian once: later ones are dropped. Runs in the worker before
    granian sets its own handlers (granian loads the app first); True when installed.

    Why: three ways a worker that was still starting never stopped, and `walletcore serve`
    waited on it for good (seen here: every stop signalled to the whole process group 1
    to 1.5 s after the start, as systemd's default `KillMode=control-group` does, and the
    main process then sends each worker its own SIGTERM):
    - a signal that came while the app was loading ran the handler the worker inherited
      from granian's main process, which does nothing in a worker: the stop was lost;
    - a second signal while the app's startup ran blocked the event loop's thread in
      granian's one-slot channel (`ignore_sigint`);
    - a signal that came while uvloop was not running (between the app's startup and the
      serving) was kept aside by uvloop until another signal came: lost too (rare: with a
      signal in the first moments after the fork, one test run in 10 to 25 on a loaded
      machine).

    How: from now on SIGTERM is remembered; granian's `set_loop_signals(loop)` (imported
    by each worker spawn function when it runs) is wrapped so that, once granian made its
    event and handlers, one handler of ours replaces them, handing granian's event the
    first signal (at once, when it came earlier) and dropping the rest. Nothing changes
    when granian no longer has that function (another layout: `test_ops_served` then shows
    whether the hang is back), and `run` bounds a stop anyway (`STOP_GRACE_SECONDS`). A
    signal between the worker's fork and this call is remembered too: the worker inherits
    that from its main process (`stop_signal_follows_the_fork`; a test signalling right as
    the workers were spawned, on a loaded machine, lost it before)."""
    try:
        from granian import _signals
    except ImportError:  # pragma: no cover - granian is what runs this
        return False
    original = getattr(_signals, "set_loop_signals", None)
    if original is None:  # pragma: no cover - another granian layout
        return False
    stop = _WORKER_STOP
    signal.signal(signal.SIGTERM, stop.signalled)
    if getattr(original, "walletcore_once", False):
        return True

    def set_loop_signals(loop: Any) -> Any:
        stop.event = original(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            # the loop's own dispatch of the signal, when the loop runs: ours, not granian's
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.signalled, sig, None)
            # and Python's, for a signal while the loop is not running: uvloop listens only
            # while it runs (between two runs it keeps a signal aside until another one
            # comes), and granian's worker runs its loop twice, its app's startup then its
            # serving, with its Rust server started in between
            signal.signal(sig, stop.signalled)
        stop.hand()  # a signal that came while the app loaded
        return stop.event

    set_loop_signals.walletcore_once = True  # type: ignore[attr-defined]
    _signals.set_loop_signals = set_loop_signals
    return True


def app_factory() -> Litestar:
    """What each server worker imports: logging set up, the app from settings, warmed up."""
    if os.environ.get(GRANIAN_WORKER_ENV) == "1":
        ignore_sigint()
        stop_signal_once()
    configure_logging()
    dump_stacks_on_sigusr1()
    app = create_app()
    services_of(app).warm_up()
    settings = OperationsSettings()
    tune_collector(settings.gc_young_threshold)
    snapshot_memory_on_sigusr2(settings.memory_snapshots)
    return app


def tune_collector(young_threshold: int) -> None:
    """The collector of a process that serves: what was built so far (the app, its OpenAPI
    document, the imported chain libraries) lives as long as the process, so it is kept
    out of the collector's passes (`gc.freeze`: a full pass over it was a pause of 30 to
    50 ms that showed in p99); and the youngest generation is collected after
    `young_threshold` allocations (0: Python's own setting). docs/performance.md, "The
    workers' collector".
    """
    gc.collect()
    gc.freeze()
    if young_threshold > 0:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(young_threshold, middle, old)


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

        os.environ[GRANIAN_WORKER_ENV] = "1"  # the workers' app_factory: their stop signals
        os.register_at_fork(before=stop_signal_follows_the_fork)  # granian forks the workers
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
            workers_kill_timeout=STOP_GRACE_SECONDS,
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
