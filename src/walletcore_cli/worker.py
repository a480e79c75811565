"""`walletcore worker`: runs the deployment's background jobs on procrastinate (PostgreSQL),
alongside any number of `walletcore serve` processes and other workers (docs/operations.md,
"Background jobs")."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from walletcore.container import create_container
from walletcore.jobs import JobsMode
from walletcore.secretfiles import ConfigurationError


def worker(args: argparse.Namespace) -> int:
    """Run until SIGINT or SIGTERM (a job in progress finishes first); 2 when the
    deployment's jobs do not run on procrastinate."""
    container = create_container()
    mode = container.jobs_mode()
    if mode is not JobsMode.PROCRASTINATE:
        print(
            f"walletcore worker: the jobs run {mode.value} here (WALLETCORE_JOBS); a worker "
            "needs WALLETCORE_DATABASE_URL on PostgreSQL and WALLETCORE_JOBS=procrastinate "
            "(the default on PostgreSQL). On SQLite, `walletcore serve` runs them itself.",
            file=sys.stderr,
        )
        return 2
    try:
        from walletcore_jobs.worker import run_worker
    except ImportError as exc:
        print(
            f"walletcore worker needs the jobs extra ({exc}): pip install 'walletcore[jobs]'",
            file=sys.stderr,
        )
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    concurrency = int(getattr(args, "concurrency", None) or 4)
    try:
        asyncio.run(run_worker(container, concurrency=concurrency))
    except ConfigurationError as exc:
        print(f"walletcore worker: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


__all__ = ["worker"]
