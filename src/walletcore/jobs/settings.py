"""Which engine runs the background jobs, and how often they run (`WALLETCORE_JOBS...`).

In the core rather than in `walletcore_jobs`: the container reads it to choose the price
source HTTP processes serve and whether the jobs run in-process, and the core imports no
adapter.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.settings import Settings


class JobsMode(StrEnum):
    #: procrastinate on the deployment's PostgreSQL: `walletcore worker` processes run
    #: them; HTTP processes read prices from the store
    PROCRASTINATE = "procrastinate"
    #: asyncio tasks in each process that calls `walletcore.container.start` (SQLite)
    INPROCESS = "inprocess"
    #: no jobs: each process refreshes its own price source; trades settle when polled
    OFF = "off"


class JobSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: The engine; unset: `procrastinate` on PostgreSQL, `inprocess` on SQLite, `off` on
    #: the in-memory storage (one process, nothing to share).
    jobs: JobsMode | None = None
    #: Seconds between two runs of the settlement job (approved and executing trades
    #: asked of the venue whether or not a client polls).
    jobs_settle_seconds: float = Field(default=5.0, gt=0)
    #: At most this many trades settled per run (oldest first).
    jobs_settle_batch: int = Field(default=200, ge=1, le=10_000)
    #: Seconds between two runs of the follow job (sends pending on chain asked of their
    #: chain, to `success` / `failed`).
    jobs_follow_seconds: float = Field(default=15.0, gt=0)
    #: At most this many sends asked about per run (the least recently checked first).
    jobs_follow_batch: int = Field(default=200, ge=1, le=10_000)
    #: Seconds between two runs of the deposit scan (every scanning chain: new blocks up
    #: to the head, the mempool, the `seen` deposits settled; docs/events.md).
    jobs_deposits_seconds: float = Field(default=10.0, gt=0)
    #: Longest one scan run goes on catching up before it leaves the rest to the next
    #: run (from its cursor: nothing is skipped).
    jobs_deposits_run_seconds: float = Field(default=30.0, gt=0)
    #: At most this many `seen` deposits per chain asked about per run (oldest first).
    jobs_deposits_batch: int = Field(default=200, ge=1, le=10_000)
    #: Days the event feed keeps an event (`POST /events`; a cursor older than that is a
    #: 410), and seconds between two runs of the job that deletes older ones.
    events_retention_days: float = Field(default=30.0, ge=1)
    jobs_prune_seconds: float = Field(default=3600.0, gt=0)
    #: Seconds between two runs of the settlement job (trades' deliveries and collections
    #: carried on; docs/settlement.md).
    jobs_settlement_seconds: float = Field(default=5.0, gt=0)
    #: Seconds between two runs of the desk's reconciliation (every client's desk and
    #: held sells compared with the chain; docs/settlement.md, "The desk's accounting").
    jobs_reconcile_seconds: float = Field(default=300.0, gt=0)
    #: Seconds between two runs of the job that ends the held transfers whose approval ran
    #: out of time (their counts given back, `send.rejected` on the feed; docs/policies.md).
    jobs_approvals_seconds: float = Field(default=60.0, gt=0)
    #: Seconds between two runs of the webhook delivery (every due endpoint: its events
    #: after its cursor posted in order; docs/events.md, "Webhooks").
    jobs_webhook_seconds: float = Field(default=2.0, gt=0)
    #: How long an HTTP process serves the stored prices it read before reading again.
    jobs_price_cache_seconds: float = Field(default=1.0, ge=0, le=60)


def jobs_mode(settings: Settings, jobs: JobSettings) -> JobsMode:
    """The engine `jobs` asks for, or the default for the storage of `settings`."""
    if jobs.jobs is not None:
        return jobs.jobs
    if settings.repo != "sql":
        return JobsMode.OFF
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    return JobsMode.PROCRASTINATE if url.startswith("postgresql") else JobsMode.INPROCESS


__all__ = ["JobSettings", "JobsMode", "jobs_mode"]
