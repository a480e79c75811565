"""A request body's arrival: cut when it stalls, and the connection left clean when the app
answers before reading it all.

The server (granian) bounds the time to read a request's headers (30 s), not its body: a
client that announced `Content-Length: 100` and sent 10 bytes held a worker's connection
for as long as it liked. And an answer given before the body was read (a body over the
cap, a 401 before the body is looked at) left the unread bytes on the connection, where
the server sometimes closed it without saying so, and sometimes kept it, so that the next
request on it got no answer. `BodyArrival` wraps the ASGI `receive` of every request that
announces a body (`RequestContextMiddleware`):

- The whole body must arrive within `timeout` seconds of the request reaching the app
  (`WALLETCORE_BODY_TIMEOUT_SECONDS`, default `BODY_TIMEOUT_SECONDS`); a wait past that
  raises `BodyTimeout`, a 400 the exception handler answers in the envelope.
- When the answer starts while the body is unread, the rest is read and dropped first
  (`drain`) if the body announced at most `DRAIN_LIMIT_BYTES` and it comes within
  `DRAIN_SECONDS` (and the body's own deadline): the connection then serves the next
  request as usual. Otherwise the answer says `Connection: close`, and the server closes
  the connection after it, every time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from walletcore.domain.errors import InvalidRequest

#: Seconds a request's whole body may take to arrive, from the moment its headers did.
BODY_TIMEOUT_SECONDS = 10.0
#: The most body bytes read and dropped to keep a connection open after an early answer
#: (16 times the body cap: a client that sends more is answered and disconnected).
DRAIN_LIMIT_BYTES = 1024 * 1024
#: The longest an early answer waits for the rest of a body it drops.
DRAIN_SECONDS = 1.0
#: The header that tells the client this connection ends with this answer.
CLOSE_HEADER = (b"connection", b"close")


class BodyTimeout(InvalidRequest):
    """The body did not arrive within the limit (a 400: the client's connection or code)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"Request body not received in time: the whole body must arrive within "
            f"{seconds:g} seconds"
        )


def announced_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The body's announced size: its `Content-Length`; None when it announces none (or
    one that is not a plain number: the server refuses those before the app sees them) or
    is chunked (no size known in advance). 0 when there is no body."""
    length: int | None = 0
    for name, value in headers:
        if name == b"content-length":
            text = value.strip()
            length = int(text) if text.isdigit() else None
        elif name == b"transfer-encoding":
            return None
    return length


class BodyArrival:
    """One request's `receive`, bounded in time, and what it has seen of the body."""

    __slots__ = ("_deadline", "_receive", "announced", "done", "read", "timeout")

    def __init__(self, receive: Any, announced: int | None, timeout: float) -> None:
        self._receive = receive
        self.timeout = timeout
        self._deadline = asyncio.get_running_loop().time() + timeout
        #: The announced size (`announced_length`; None: chunked).
        self.announced = announced
        #: Body bytes received so far.
        self.read = 0
        #: The body ended (its last message, or the client disconnected).
        self.done = False

    async def receive(self) -> Any:
        if self.done:  # after the body: a wait for the disconnect is not bounded by it
            return await self._receive()
        message = await self._next(self._deadline)
        if message is None:
            raise BodyTimeout(self.timeout)
        return message

    async def _next(self, deadline: float) -> Any:
        """The next message before `deadline` (None once it passed), counted."""
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return None
        try:
            async with asyncio.timeout(remaining):
                message = await self._receive()
        except TimeoutError:
            return None
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
            if not message.get("more_body", False):
                self.done = True
        else:  # http.disconnect: nothing more will come
            self.done = True
        return message

    async def drain(self) -> bool:
        """Read and drop what is left of the body, within the limits above: True when it
        was read to its end (the connection can serve another request)."""
        if self.done:
            return True
        if self.announced is not None and self.announced > DRAIN_LIMIT_BYTES:
            return False
        deadline = min(self._deadline, asyncio.get_running_loop().time() + DRAIN_SECONDS)
        while not self.done:
            if self.read > DRAIN_LIMIT_BYTES or await self._next(deadline) is None:
                return False
        return True
