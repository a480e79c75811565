"""Readiness: can this process serve the API now? (`GET /health/ready` in the binding.)

Rules:
- Checks: the storage (`database`), each chain's node (`node:<CHAIN>`), and the price age
  (`prices`: the most stale symbol's newest price against `price_max_age_seconds`, read
  through the port first, so a source that reads a shared table reads it now).
- An adapter without a probe (`walletcore.ports.HealthCheck`, `PriceAges`) is `skipped`:
  it neither passes nor fails readiness. Ready means no check `failing`.
- Every check runs at once, each under its own timeout; a check that does not answer in
  time is `failing` with the error `timeout`.
- A failure is named, never described: `timeout`, `unreachable` (a refused or dropped
  connection) or the exception's class name. An exception's text can carry a node URL
  with its API key, so it is never shown; only a `CheckFailed`'s reason is, which its
  adapter wrote to be shown (what is wrong and what to do).
- `jobs`: when the background jobs run in other processes (`walletcore worker` on
  procrastinate), whether one of them is alive (`jobs_monitor`, from the jobs engine's
  plugin): without one, prices are never refreshed, trades not settled, sends not
  followed, and readiness says so instead of only `no prices`. A `warning`, not a
  failure: readiness fails on what a dead worker leads to (`no prices`, `stale`), not on a
  worker's restart.
- Probes run at most once per `min_interval_seconds`: concurrent callers share one round,
  and a round that just ended answers the next callers (a readiness endpoint without auth
  must not become a way to flood the nodes and the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from walletcore.domain.assets import Chain
from walletcore.ports import (
    ChainGateway,
    CheckFailed,
    HealthCheck,
    PriceAges,
    PriceSource,
    Storage,
)

DEFAULT_TIMEOUT_SECONDS = 2.0


class CheckStatus(StrEnum):
    OK = "ok"
    FAILING = "failing"
    SKIPPED = "skipped"  # the adapter has no probe
    #: failing, but the API still answers what does not need it (`jobs`): shown, and
    #: readiness stays ok, so a worker's restart does not take every server out of rotation
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    status: CheckStatus
    #: Why it fails: `timeout`, `unreachable`, `stale`, `no prices`, an exception class, or
    #: a `CheckFailed`'s reason.
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Readiness:
    checks: tuple[CheckResult, ...]
    #: symbol -> seconds since its newest price (empty when the source cannot tell).
    price_ages: Mapping[str, float] = field(default_factory=dict)
    max_price_age_seconds: float = 0.0

    @property
    def ready(self) -> bool:
        return all(check.status is not CheckStatus.FAILING for check in self.checks)

    @property
    def oldest_price_age(self) -> float | None:
        return max(self.price_ages.values()) if self.price_ages else None


class HealthService:
    def __init__(
        self,
        storage: Storage,
        gateways: Mapping[Chain, ChainGateway],
        prices: PriceSource,
        *,
        max_price_age_seconds: float,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        min_interval_seconds: float = 1.0,
        jobs_monitor: HealthCheck | None = None,
    ) -> None:
        self._storage = storage
        self._jobs_monitor = jobs_monitor
        self._gateways = gateways
        self._prices = prices
        self.max_price_age_seconds = max_price_age_seconds
        self.timeout_seconds = timeout_seconds
        self._min_interval = min_interval_seconds
        self._round: asyncio.Task[Readiness] | None = None
        self._last: tuple[float, Readiness] | None = None

    async def readiness(self) -> Readiness:
        """Every check, run at once (shared with concurrent callers; reused briefly)."""
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < self._min_interval:
            return self._last[1]
        loop = asyncio.get_running_loop()
        task = self._round
        if task is None or task.done() or task.get_loop() is not loop:
            task = self._round = loop.create_task(self._probe())
        found = await asyncio.shield(task)
        self._last = (time.monotonic(), found)
        return found

    async def pending_sends(self) -> int | None:
        """How many broadcast sends are still `pending` on chain (every client's), or None
        when the storage cannot tell now (the gauge keeps its last value)."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                async with self._storage.read() as unit:
                    return await unit.sends.count_following()
        except Exception:  # noqa: BLE001 - a scrape never fails on it
            return None

    async def price_ages(self) -> dict[str, float]:
        """symbol -> seconds since its newest price, the source asked first (as `/prices`
        asks it); empty when the source cannot tell. Never raises: a source that does not
        answer in time leaves the ages it knew."""
        if not isinstance(self._prices, PriceAges):
            return {}
        with contextlib.suppress(Exception):  # the ages known before are the answer
            await asyncio.wait_for(self._prices.price_map(), self.timeout_seconds)
        return self._ages()

    def _ages(self) -> dict[str, float]:
        if not isinstance(self._prices, PriceAges):
            return {}
        return {s: age.total_seconds() for s, age in self._prices.ages().items()}

    async def _probe(self) -> Readiness:
        probes: list[tuple[str, Callable[[], Awaitable[None]] | None]] = [
            ("database", _probe_of(self._storage))
        ]
        probes += [(f"node:{chain.value}", _probe_of(gw)) for chain, gw in self._gateways.items()]
        if self._jobs_monitor is not None:
            probes.append(("jobs", self._jobs_monitor.check))
        priced = isinstance(self._prices, PriceAges)
        probes.append(("prices", self._read_prices if priced else None))
        results = await asyncio.gather(*(self._run(name, probe) for name, probe in probes))
        ages = self._ages()
        checks = (
            *(_warning(r) if r.name == "jobs" else r for r in results[:-1]),
            self._price_check(results[-1], ages),
        )
        return Readiness(checks, ages, self.max_price_age_seconds)

    async def _read_prices(self) -> None:
        await self._prices.price_map()

    async def _run(self, name: str, probe: Callable[[], Awaitable[None]] | None) -> CheckResult:
        if probe is None:
            return CheckResult(name, CheckStatus.SKIPPED)
        started = time.perf_counter()
        try:
            await asyncio.wait_for(probe(), self.timeout_seconds)
        except Exception as exc:  # noqa: BLE001 - every failure is a failing check, by name
            return CheckResult(
                name, CheckStatus.FAILING, failure_name(exc), time.perf_counter() - started
            )
        return CheckResult(name, CheckStatus.OK, None, time.perf_counter() - started)

    def _price_check(self, read: CheckResult, ages: Mapping[str, float]) -> CheckResult:
        """The read of the prices, judged on the ages it left."""
        if read.status is not CheckStatus.OK:
            return read  # skipped (no ages), or the source failed to answer
        if not ages:
            return CheckResult("prices", CheckStatus.FAILING, "no prices", read.seconds)
        if max(ages.values()) > self.max_price_age_seconds:
            return CheckResult("prices", CheckStatus.FAILING, "stale", read.seconds)
        return read


def _warning(result: CheckResult) -> CheckResult:
    """A failing check that only degrades the service, shown as a warning."""
    if result.status is not CheckStatus.FAILING:
        return result
    return CheckResult(result.name, CheckStatus.WARNING, result.error, result.seconds)


def _probe_of(adapter: object) -> Callable[[], Awaitable[None]] | None:
    return adapter.check if isinstance(adapter, HealthCheck) else None


def failure_name(exc: BaseException) -> str:
    """What a failing check shows, never the exception's text: `timeout` or `unreachable`
    when the failure (or what caused it: an adapter may wrap it) is one, else its class."""
    if isinstance(exc, CheckFailed):
        return exc.reason
    seen: BaseException | None = exc
    for _ in range(8):  # a short walk: causes can chain, and could loop
        if seen is None:
            break
        if isinstance(seen, TimeoutError):
            return "timeout"
        if isinstance(seen, ConnectionError):
            return "unreachable"
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


__all__ = [
    "CheckResult",
    "CheckStatus",
    "HealthService",
    "Readiness",
    "failure_name",
]
