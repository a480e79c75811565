"""Ports of the runtime: injected time, and the start/stop of adapters that hold
connections or background work."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


class Clock(Protocol):
    """Injected time, so lapsed quotes and token expiry are testable without sleeps."""

    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


@runtime_checkable
class Lifecycle(Protocol):
    """Optional: adapters with background work or connections implement it."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


__all__ = ["Clock", "Lifecycle"]
