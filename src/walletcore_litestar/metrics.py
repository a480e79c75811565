"""Prometheus metrics (`GET /metrics`): the core's `Observer` on prometheus-client.

Several worker processes (granian's, uvicorn's) each count what they serve; `walletcore
serve` runs them in prometheus-client's multiprocess mode (`multiprocess_directory`): each
worker writes its values to files in one private directory, and `/metrics` from any worker
reads them all, so a scrape shows the whole service. Without that directory (an app built
in a test, an embedder's single process) an app keeps its values in its own registry.

Names and labels (docs/operations.md):
- `walletcore_http_requests_total{method,route,status}`, and the histogram
  `walletcore_http_request_duration_seconds{method,route,status}`; `route` is the route
  template (`/trade/approve`), `unmatched` when no route matched;
- `walletcore_price_age_seconds{symbol}`: seconds since the symbol's newest price, set
  when scraped; `walletcore_price_max_age_seconds`: the age past which quotes stop;
- `walletcore_venue_errors_total{operation,kind}`, `walletcore_node_errors_total{chain,
  operation,kind}`; kinds `rejected`, `timeout`, `unavailable`;
- `walletcore_sends_started_total{chain}`, `walletcore_send_broadcasts_total{chain,outcome}`
  (`accepted`, `refused`, `unknown`);
- `walletcore_nonce_lease_wait_seconds{sequence}`: how long a send waited for its nonce
  lease (`eip155:<chain id>`, the Bitcoin network's key);
- `walletcore_sends_pending`: broadcast sends still pending on chain, every client's:
  counted from the storage at each scrape (one indexed count), and set by the
  `follow_sends` job where it runs in-process;
- `walletcore_auth_failures_total{reason}`: refused `/auth`, `reason` one of
  `walletcore.ports.metrics.AUTH_FAILURE_REASONS` (each shown from 0), never a client id;
- `walletcore_deposit_scan_lag_blocks{chain}`: blocks between the node's head and the
  deposit scan's cursor after the last run in this process; `walletcore_deposit_scan_
  failures_total{chain}`: runs that stopped on an error (the next resumes at the cursor);
- `walletcore_desk_balance{client,symbol}`, `walletcore_desk_owed{client,symbol}`,
  `walletcore_desk_incoming{client,symbol}` (in the asset's units), `walletcore_desk_
  mismatches{client,symbol}` and `walletcore_desk_deliveries_paused{client,symbol}` (1
  paused): each api client's desk as the last `reconcile_desk` run in this process found
  it; labels the client id and the asset's symbol only;
- `walletcore_worker_up` (a `pid` label per live worker in multiprocess mode).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

from walletcore.ports import Observer
from walletcore.ports.metrics import AUTH_FAILURE_REASONS

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Without its charset: Litestar adds `charset=utf-8` to a `text/` type itself.
CONTENT_TYPE = CONTENT_TYPE_LATEST.replace("; charset=utf-8", "")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LEASE_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 15, 30, 60, 180)
#: The desk's gauges (`walletcore_desk_<name>{client,symbol}`), as the last reconciliation.
_DESK_GAUGES = {
    "balance": "The desk's balance on chain, in the asset's units",
    "owed": "What the desk owes to deliveries not settled yet, in the asset's units",
    "incoming": "What sells not collected yet will bring the desk, in the asset's units",
    "mismatches": "Differences between the desk's ledger and the chain",
    "deliveries_paused": "1 while the reconciliation or the operator pauses deliveries",
}
_LIVE_FILE = re.compile(r"\Agauge_live\w*?_(?P<pid>\d+)\.db\Z")


class PrometheusObserver(Observer):
    """The measurements of one app, in its own registry (and the shared files when the
    multiprocess directory is set)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        http = ["method", "route", "status"]
        self.requests = Counter(
            "walletcore_http_requests", "HTTP requests answered", http, registry=registry
        )
        self.latency = Histogram(
            "walletcore_http_request_duration_seconds",
            "Time to answer an HTTP request",
            http,
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.auth_failures = Counter(
            "walletcore_auth_failures",
            "Refused /auth, by reason (never the client id)",
            ["reason"],
            registry=registry,
        )
        for reason in AUTH_FAILURE_REASONS:  # every reason shown from 0, for rates and alerts
            self.auth_failures.labels(reason)
        self.venue_errors = Counter(
            "walletcore_venue_errors",
            "Venue calls that failed, by operation and kind",
            ["operation", "kind"],
            registry=registry,
        )
        self.node_errors = Counter(
            "walletcore_node_errors",
            "Chain node calls that failed on the node's side, by chain, operation and kind",
            ["chain", "operation", "kind"],
            registry=registry,
        )
        self.lease_waits = Histogram(
            "walletcore_nonce_lease_wait_seconds",
            "Time a send waited for the nonce lease of its address",
            ["sequence"],
            buckets=LEASE_BUCKETS,
            registry=registry,
        )
        self.sends_started = Counter(
            "walletcore_sends_started",
            "Sends that built their transaction, by chain",
            ["chain"],
            registry=registry,
        )
        self.broadcasts = Counter(
            "walletcore_send_broadcasts",
            "Broadcasts of sends, by chain and outcome",
            ["chain", "outcome"],
            registry=registry,
        )
        self.price_age = Gauge(
            "walletcore_price_age_seconds",
            "Seconds since the symbol's newest price (set when scraped)",
            ["symbol"],
            registry=registry,
            multiprocess_mode="livemostrecent",
        )
        self.price_max_age = Gauge(
            "walletcore_price_max_age_seconds",
            "Age past which a price is no longer quoted on",
            registry=registry,
            multiprocess_mode="livemostrecent",
        )
        self.worker_up = Gauge(
            "walletcore_worker_up",
            "1 per live worker process serving the API",
            registry=registry,
            multiprocess_mode="liveall",
        )
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._sends_pending: Gauge | None = None  # made by the first run of the follow job
        self._scan_gauges: tuple[Gauge, Counter] | None = None  # by the first deposit scan
        self._desk_gauges: dict[str, Gauge] | None = None  # by the first reconciliation

    # -- the Observer ---------------------------------------------------------------------
    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method if method in _METHODS else "other", route, status)
        children = self._request_children.get(key)
        if children is None:  # bounded: methods, templates and statuses are few
            labels = (key[0], route, str(status))
            children = (self.requests.labels(*labels), self.latency.labels(*labels))
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def auth_failure(self, reason: str) -> None:
        if reason in AUTH_FAILURE_REASONS:  # bounded labels whatever a caller passes
            self.auth_failures.labels(reason).inc()

    def venue_error(self, operation: str, kind: str) -> None:
        self.venue_errors.labels(operation, kind).inc()

    def node_error(self, chain: str, operation: str, kind: str) -> None:
        self.node_errors.labels(chain, operation, kind).inc()

    def nonce_lease_wait(self, sequence: str, seconds: float) -> None:
        self.lease_waits.labels(sequence).observe(seconds)

    def send_started(self, chain: str) -> None:
        self.sends_started.labels(chain).inc()

    def send_broadcast(self, chain: str, outcome: str) -> None:
        self.broadcasts.labels(chain, outcome).inc()

    def sends_pending(self, count: int) -> None:
        if self._sends_pending is None:  # not before: a process that never follows sends
            self._sends_pending = Gauge(  # exposes no misleading 0
                "walletcore_sends_pending",
                "Broadcast sends still pending on chain (every client's), as last read",
                registry=self.registry,
                multiprocess_mode="livemostrecent",
            )
        self._sends_pending.set(count)

    def deposit_scan(
        self,
        chain: str,
        *,
        head: int | None,
        cursor: int | None,
        seconds: float,
        failed: bool,
    ) -> None:
        if self._scan_gauges is None:  # not before: a process that never scans
            self._scan_gauges = (
                Gauge(
                    "walletcore_deposit_scan_lag_blocks",
                    "Blocks between the node's head and the deposit scan's cursor, as last run",
                    ["chain"],
                    registry=self.registry,
                    multiprocess_mode="livemostrecent",
                ),
                Counter(
                    "walletcore_deposit_scan_failures",
                    "Deposit scan runs that stopped on an error (resumed by the next run)",
                    ["chain"],
                    registry=self.registry,
                ),
            )
        lag, failures = self._scan_gauges
        if head is not None and cursor is not None:
            lag.labels(chain).set(max(0, head - cursor))
        if failed:
            failures.labels(chain).inc()

    def desk_account(
        self,
        client_id: str,
        symbol: str,
        *,
        balance: float | None,
        owed: float,
        incoming: float,
        mismatches: int,
        paused: bool,
    ) -> None:
        gauges = self._desk_gauges
        if gauges is None:  # not before: a process that never reconciles shows no desk
            gauges = self._desk_gauges = {
                name: Gauge(
                    f"walletcore_desk_{name}",
                    text,
                    ["client", "symbol"],
                    registry=self.registry,
                    multiprocess_mode="livemostrecent",
                )
                for name, text in _DESK_GAUGES.items()
            }
        labels = (client_id, symbol)
        if balance is not None:
            gauges["balance"].labels(*labels).set(balance)
        gauges["owed"].labels(*labels).set(owed)
        gauges["incoming"].labels(*labels).set(incoming)
        gauges["mismatches"].labels(*labels).set(mismatches)
        gauges["deliveries_paused"].labels(*labels).set(1 if paused else 0)

    # -- scraping -------------------------------------------------------------------------
    def worker_started(self) -> None:
        """This process serves: counted in `walletcore_worker_up`; the files of workers
        that died (granian replaces them) leave the live gauges."""
        directory = os.environ.get(MULTIPROCESS_ENV)
        if directory:
            forget_dead_workers(directory)
        self.worker_up.set(1)

    def prices(self, ages: Mapping[str, float], max_age: float) -> None:
        for symbol, age in ages.items():
            self.price_age.labels(symbol).set(age)
        self.price_max_age.set(max_age)

    def exposition(self) -> bytes:
        """The text exposition: every worker's values in multiprocess mode, else this app's."""
        directory = os.environ.get(MULTIPROCESS_ENV)
        if not directory:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(merged)


def forget_dead_workers(directory: str) -> None:
    """Drop the live gauges of processes that no longer run (their counters stay summed)."""
    for name in os.listdir(directory):
        match = _LIVE_FILE.match(name)
        if match is None:
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and not _alive(pid):
            multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@contextmanager
def multiprocess_directory() -> Iterator[str]:
    """The directory the workers write their values to, for the life of the server.

    `PROMETHEUS_MULTIPROC_DIR` when the operator set it (kept; they empty it between
    runs); else a new private (0700) temporary directory, removed on exit. Set before the
    workers start, so every worker's metrics write there.
    """
    given = os.environ.get(MULTIPROCESS_ENV)
    if given:
        yield given
        return
    directory = tempfile.mkdtemp(prefix="walletcore-metrics-")  # mode 0700
    os.environ[MULTIPROCESS_ENV] = directory
    # prometheus-client picks its value class when imported, perhaps before this.
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROCESS_ENV, None)
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        shutil.rmtree(directory, ignore_errors=True)


__all__ = [
    "CONTENT_TYPE",
    "MULTIPROCESS_ENV",
    "PrometheusObserver",
    "forget_dead_workers",
    "multiprocess_directory",
]
