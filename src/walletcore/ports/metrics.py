"""Port of the service's measurements: what happened, told to an `Observer`.

The core knows no metrics library. The HTTP binding implements an `Observer` on Prometheus
(`walletcore_litestar.metrics`) and hooks it to the adapters; an embedder may implement one
on anything else. Every method has a no-op default, so an observer names only what it keeps.
Label values are bounded: route templates, chain names, error kinds, asset symbols, never
amounts; the one id is an api client's (the desk's figures), of which a deployment has few.
"""

from __future__ import annotations

#: Kinds of a venue error: the venue refused the order, did not answer in time, or could
#: not be asked (no price, connection refused, anything else).
VENUE_ERROR_KINDS = ("rejected", "timeout", "unavailable")
#: Kinds of a node error: the node refused a transaction, did not answer in time, could not
#: be reached or answered an error.
NODE_ERROR_KINDS = ("rejected", "timeout", "unavailable")
#: Outcomes of a broadcast: the node took it, refused it (nothing sent), or it is unknown.
BROADCAST_OUTCOMES = ("accepted", "refused", "unknown")
#: Why `/auth` refused (every one answers `401 Invalid credentials` alike): no client id or
#: api key, or a client id that is not an id; an id of no client; a client's wrong key;
#: the right key of a disabled client.
AUTH_FAILURE_REASONS = ("malformed", "unknown_client", "wrong_key", "disabled")


class Observer:
    """Receives the service's measurements; this base class drops them."""

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """One HTTP request answered: its route template (`/trade/approve`), never a path."""

    def auth_failure(self, reason: str) -> None:
        """`/auth` refused; `reason` in AUTH_FAILURE_REASONS (never the client id)."""

    def venue_error(self, operation: str, kind: str) -> None:
        """A venue call (`execute`, `status`, `cancel`) failed; `kind` in VENUE_ERROR_KINDS."""

    def node_error(self, chain: str, operation: str, kind: str) -> None:
        """A chain gateway call failed on the node's side; `kind` in NODE_ERROR_KINDS."""

    def nonce_lease_wait(self, sequence: str, seconds: float) -> None:
        """A send waited `seconds` for the nonce lease of an address on `sequence`."""

    def send_started(self, chain: str) -> None:
        """A send built its transaction (a nonce or coins reserved)."""

    def send_broadcast(self, chain: str, outcome: str) -> None:
        """A send's broadcast ended; `outcome` in BROADCAST_OUTCOMES."""

    def sends_pending(self, count: int) -> None:
        """After a run of the `follow_sends` job: how many of the sends it asked about are
        still pending on chain (at most its batch)."""

    def deposit_scan(
        self,
        chain: str,
        *,
        head: int | None,
        cursor: int | None,
        seconds: float,
        failed: bool,
    ) -> None:
        """A run of the `scan_deposits` job on `chain` ended: the node's head and the
        cursor's height after it (None: not read), how long it took, whether it failed."""

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
        """After a run of the `reconcile_desk` job, one client's desk in one asset (in the
        asset's units): its balance on chain (None: not read), what it owes to deliveries,
        what collections will bring, how many differences, whether deliveries are paused."""


__all__ = [
    "AUTH_FAILURE_REASONS",
    "BROADCAST_OUTCOMES",
    "NODE_ERROR_KINDS",
    "VENUE_ERROR_KINDS",
    "Observer",
]
