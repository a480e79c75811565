"""`walletcore serve`: check the configuration once, prepare the storage, then run the
Litestar service (`walletcore_litestar.server`) in its workers."""

from __future__ import annotations

import argparse
import asyncio
import errno
import socket
import sys
from pathlib import Path

from walletcore.container import Container, check_profile, create_container
from walletcore.ports import CheckFailed, Lifecycle
from walletcore.services.health import failure_name

#: How long the banner waits to learn whether a worker runs.
JOBS_CHECK_SECONDS = 5.0


def serve(args: argparse.Namespace) -> int:
    from walletcore_litestar.server import run

    if args.workers < 1:
        print("walletcore: --workers must be at least 1", file=sys.stderr)
        return 2
    # Fail here, with a clear message, rather than in every worker.
    container = create_container()
    check_profile(container)
    container.token_key()
    notes = asyncio.run(_preflight(container))
    home = Path(container.settings().home).expanduser().resolve()
    print(f"walletcore: home {home} (WALLETCORE_HOME)", file=sys.stderr, flush=True)
    for note in notes:
        print(f"walletcore: {note}", file=sys.stderr, flush=True)
    busy = address_in_use(args.host, args.port)
    if busy is not None:
        print(f"walletcore: {args.host}:{args.port}: {busy}", file=sys.stderr)
        return 2
    run(
        host=args.host,
        port=args.port,
        workers=args.workers,
        server=args.server,
        log_level=args.log_level,
    )
    return 0


async def _preflight(container: Container) -> list[str]:
    """Open the storage once before any worker starts: the sandbox migrates its SQLite file
    here; production checks the schema and refuses an unmigrated or newer one. Returns
    what the operator should read before the first request: where the background jobs run,
    and whether a worker runs them when this server does not."""
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
        await storage.aclose()
    return await jobs_notes(container)


async def jobs_notes(container: Container) -> list[str]:
    """The banner's lines on the background jobs when other processes run them
    (`walletcore worker` on procrastinate): said, and whether one is alive now."""
    monitor = container.jobs_monitor()
    if monitor is None:
        return []
    engine = container.jobs_mode().value
    where = f"background jobs (WALLETCORE_JOBS={engine}) run in `walletcore worker` processes"
    notes = [f"{where}, not in this server"]
    try:
        await asyncio.wait_for(monitor.check(), JOBS_CHECK_SECONDS)
    except CheckFailed as failed:
        notes.append(f"warning: {failed.reason}; start `walletcore worker` (docs/jobs.md)")
    except Exception as exc:  # noqa: BLE001 - a banner line, never a failed start
        notes.append(f"warning: could not tell whether a worker runs ({failure_name(exc)})")
    return notes


def address_in_use(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on ("address in use", ...), or None.

    granian listens with SO_REUSEPORT, so a second server on a busy port would start and
    share the requests with the first without a word: bind once without it first (with
    SO_REUSEADDR, so a previous server's connections in TIME_WAIT do not count). Another
    process may still take the port between this check and the server's own bind."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot resolve: {exc.strerror}"
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "address in use"
            return exc.strerror or str(exc)
    return None
