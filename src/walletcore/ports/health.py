"""Ports of readiness: an adapter that can be probed, and a price source that knows how old
its prices are (`walletcore.services.health` reads both; `GET /health/ready` shows them)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class HealthCheck(Protocol):
    """Optional: an adapter (storage, chain gateway) that can say whether it is usable now."""

    async def check(self) -> None:
        """Return when usable; raise when not, with the cheapest call that proves it (a
        `SELECT 1`, a node's block height). Any exception counts as unhealthy; only its
        class name is ever shown, never its text (which may carry a URL or a key), except
        a `CheckFailed`'s reason."""
        ...


class CheckFailed(Exception):
    """A check's failure whose `reason` is shown as its error: written by the adapter to be
    read by an operator (what is wrong and what to do), never a URL, a key or a driver's
    text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class PriceAges(Protocol):
    """Optional: a price source that can tell how long ago it last refreshed each symbol."""

    def ages(self) -> Mapping[str, timedelta]:
        """symbol -> time since its newest recorded price; symbols never priced are absent."""
        ...


__all__ = ["CheckFailed", "HealthCheck", "PriceAges"]
