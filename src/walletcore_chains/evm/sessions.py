"""The HTTP sessions of an EVM chain's JSON-RPC client, kept without web3's lock.

web3's `HTTPSessionManager` (7.x) guards its session cache with one `threading.Lock` per
process, taken through a thread pool (`run_in_executor(pool, lock.acquire)`). A call
cancelled while it waits for that lock releases the lock in its `finally` although it
never held it, and the pool's thread then takes the lock for a task that is gone: nobody
releases it again, and from then on every JSON-RPC call of the process waits for it for
good (seen here: a test's event loop idle for 15 minutes, one pool thread blocked on
`lock.acquire`). A cancelled call is ordinary in this service (a request's deadline, a
scan's range halved, a client gone).

`LoopSessions` keeps web3's cache (one aiohttp session per event loop and endpoint, stale
ones replaced), but its critical section holds no `await`, so a plain lock held for a few
dictionary operations is enough and nothing can be left holding it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from aiohttp import ClientSession, ClientTimeout, TCPConnector
from web3._utils.caching.caching_utils import generate_cache_key
from web3._utils.http_session_manager import HTTPSessionManager

log = logging.getLogger(__name__)

#: What waits before an evicted session is closed: longer than a call on it may take.
_EVICTED_GRACE_SECONDS = 30.0


def _new_session() -> ClientSession:
    # web3's own settings: a connection per request, closed ones cleaned up
    return ClientSession(
        raise_for_status=True,
        connector=TCPConnector(force_close=True, enable_cleanup_closed=True),
    )


class LoopSessions(HTTPSessionManager):
    """web3's session manager whose async cache never awaits under its lock (module
    docstring). Installed by `rpc_web3` on every provider it makes."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()

    async def async_cache_and_return_session(
        self,
        endpoint_uri: Any,
        session: ClientSession | None = None,
        request_timeout: ClientTimeout | None = None,
    ) -> ClientSession:
        loop = asyncio.get_running_loop()
        key = generate_cache_key(f"{id(loop)}:{endpoint_uri}")
        stale: ClientSession | None = None
        evicted: dict[str, Any] | None = None
        with self._guard:  # no await in here
            cached: ClientSession | None = self.session_cache.get_cache_entry(key)
            if cached is not None and (cached.closed or cached._loop.is_closed()):
                stale = self.session_cache._data.pop(key)
                cached = None
            if cached is None:
                cached, evicted = self.session_cache.cache(key, session or _new_session())
        if stale is not None and not stale.closed and not stale._loop.is_closed():
            await stale.close()
        if evicted:
            loop.create_task(self._close_later(list(evicted.values())))
        assert cached is not None
        return cached

    @staticmethod
    async def _close_later(sessions: list[ClientSession]) -> None:
        await asyncio.sleep(_EVICTED_GRACE_SECONDS)
        for session in sessions:
            if not session.closed and not session._loop.is_closed():
                await session.close()


__all__ = ["LoopSessions"]
