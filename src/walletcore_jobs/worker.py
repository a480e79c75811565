"""A worker process: the container's adapters started, procrastinate's schema ensured, and
procrastinate's worker running the deployment's jobs until SIGINT / SIGTERM."""

from __future__ import annotations

from typing import Any

from walletcore.container import Container, start, stop
from walletcore_jobs.app import make_app
from walletcore_jobs.schema import ensure_schema


async def run_worker(
    container: Container,
    *,
    concurrency: int = 4,
    schema: str | None = None,
    stalled_seconds: float = 30.0,
    stalled_check_seconds: float = 5.0,
    **worker_options: Any,
) -> None:
    """Run until stopped (`worker_options`: procrastinate's `run_worker_async` options,
    e.g. `update_heartbeat_interval`, `install_signal_handlers`)."""
    app = make_app(
        container,
        schema=schema,
        stalled_seconds=stalled_seconds,
        stalled_check_seconds=stalled_check_seconds,
    )
    await start(container)
    try:
        async with app.open_async():
            await ensure_schema(app)
            await app.run_worker_async(concurrency=concurrency, **worker_options)
    finally:
        await stop(container)


__all__ = ["run_worker"]
