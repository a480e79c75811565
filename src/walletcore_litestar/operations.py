"""Settings of operations (health, metrics, log format), read from `WALLETCORE_*` variables
next to the core's settings; the binding's own, so the core's `Settings` stays the API's."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore_litestar.arrival import BODY_TIMEOUT_SECONDS

LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
METRICS_PATH = "/metrics"
#: The GET endpoints outside the spec's POST API (and outside its OpenAPI document).
OPERATIONS_PATHS = (LIVE_PATH, READY_PATH, METRICS_PATH)
#: A server worker's collector passes over its youngest objects after this many (net)
#: allocations, not Python's 700: each pass then finds more of them already freed, and a
#: request's objects are scanned fewer times while it waits on the database
#: (docs/performance.md, "The workers' collector").
YOUNG_THRESHOLD = 10_000


class OperationsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: `WALLETCORE_LOG_FORMAT`: `text` (one readable line a record) or `json` (one JSON
    #: object a line: time, level, logger, message, requestId) for `walletcore serve`.
    log_format: Literal["text", "json"] = "text"
    #: `WALLETCORE_METRICS_TOKEN`: when set, `GET /metrics` needs `Authorization: Bearer
    #: <token>`; unset, it is open (keep it on an internal network, as the health endpoints).
    metrics_token: SecretStr | None = Field(default=None, min_length=16)
    #: `WALLETCORE_HEALTH_TIMEOUT_SECONDS`: how long each readiness check may take.
    health_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    #: `WALLETCORE_BODY_TIMEOUT_SECONDS`: how long a request's whole body may take to
    #: arrive once its headers did; past it the request is a 400 and its connection is
    #: closed (`walletcore_litestar.arrival`).
    body_timeout_seconds: float = Field(default=BODY_TIMEOUT_SECONDS, gt=0, le=300)
    #: `WALLETCORE_GC_YOUNG_THRESHOLD`: container objects allocated (net) between two
    #: passes of the collector over the youngest generation, in a `walletcore serve` worker
    #: (`walletcore_litestar.server.tune_collector`); Python's own is 700. `0` leaves
    #: Python's setting alone. Never disables the collector.
    gc_young_threshold: int = Field(default=YOUNG_THRESHOLD, ge=0, le=1_000_000)
    #: `WALLETCORE_MEMORY_SNAPSHOTS`: a folder; when set, a `walletcore serve` worker
    #: starts tracing its allocations on its first SIGUSR2 and writes a `tracemalloc`
    #: snapshot there on each later one (`walletcore_litestar.memory`). For diagnosis.
    memory_snapshots: Path | None = None
