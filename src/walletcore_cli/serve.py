"""`walletcore serve`: check the configuration once, prepare the storage, then run the
Litestar service (`walletcore_litestar.server`) in its workers."""

from __future__ import annotations

import argparse
import asyncio
import sys

from walletcore.container import Container, check_profile, create_container
from walletcore.ports import Lifecycle


def serve(args: argparse.Namespace) -> int:
    from walletcore_litestar.server import run

    if args.workers < 1:
        print("walletcore: --workers must be at least 1", file=sys.stderr)
        return 2
    # Fail here, with a clear message, rather than in every worker.
    container = create_container()
    check_profile(container)
    container.token_key()
    asyncio.run(_preflight(container))
    run(
        host=args.host,
        port=args.port,
        workers=args.workers,
        server=args.server,
        log_level=args.log_level,
    )
    return 0


async def _preflight(container: Container) -> None:
    """Open the storage once before any worker starts: the sandbox migrates its SQLite file
    here; production checks the schema and refuses an unmigrated or newer one."""
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
        await storage.aclose()
