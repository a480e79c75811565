"""The outermost ASGI layer: request id, `X-Request-Id` on every response, one log line each,
and the body's arrival bounded (`arrival.BodyArrival`: a stalled body is cut, an unread one
drained or its connection closed).

It wraps the whole Litestar app (routing included), so unknown paths and wrong methods get
the header and the log line too. The log line carries method, path, status, requestId and
duration, never a body or a header value other than the request id. The request id is also
set in `logs.REQUEST_ID` while the request is served (JSON logs carry it on every record),
and each request is told to the `Observer` (metrics) with its route template, never its path.
"""

from __future__ import annotations

import logging
import time
from sys import getrecursionlimit
from typing import Any

from walletcore.domain.ids import new_id
from walletcore.ports import Observer
from walletcore_litestar.arrival import (
    BODY_TIMEOUT_SECONDS,
    CLOSE_HEADER,
    BodyArrival,
    announced_length,
)
from walletcore_litestar.envelope import REQUEST_ID_KEY, encode_error
from walletcore_litestar.limits import RECURSION_LIMIT, pin_recursion_limit
from walletcore_litestar.logs import REQUEST_ID
from walletcore_litestar.wire import MAX_REQUEST_ID_CHARS

log = logging.getLogger("walletcore.http")

_REQUEST_ID_HEADER = b"x-request-id"
#: The most bytes of header names and values together. The server's own parser refuses
#: earlier what it cannot parse (see docs/security.md); this is the application's limit,
#: answered in the envelope. A bearer token is about 250 bytes.
MAX_HEADER_BYTES = 16 * 1024
HEADERS_TOO_LARGE = f"Request headers too large; the limit is {MAX_HEADER_BYTES} bytes"
_LINE = "method=%s path=%s status=%d requestId=%s durationMs=%.2f"
#: The route of a request no route matched (an unknown path, a refused request id).
UNMATCHED_ROUTE = "unmatched"
INVALID_REQUEST_ID = (
    f"X-Request-Id must be 1 to {MAX_REQUEST_ID_CHARS} printable ASCII characters, sent once"
)


def parse_request_id(headers: list[tuple[bytes, bytes]]) -> tuple[str, bool]:
    """(request id, valid): the inbound one if acceptable, else a fresh one.

    Absent or empty: a fresh id, valid. Otherwise echoed exactly if it is at most 128
    characters of printable ASCII (0x20-0x7E); longer, another byte, or the header sent
    twice: a fresh id, not valid (a 400).
    """
    found: bytes | None = None
    for name, value in headers:
        if name == _REQUEST_ID_HEADER:
            if found is not None:
                return new_id(), False
            found = value
    if found is None:
        return new_id(), True
    value = found
    if not value:
        return new_id(), True
    if len(value) > MAX_REQUEST_ID_CHARS or not all(0x20 <= b <= 0x7E for b in value):
        return new_id(), False
    return value.decode("ascii"), True


def _printable(text: str, limit: int = 256) -> str:
    """A path fit for one log line: non-printables escaped, length capped."""
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


class RequestContextMiddleware:
    """Raw ASGI middleware (cheap on the hot path) around the whole application."""

    def __init__(
        self,
        app: Any,
        observer: Observer | None = None,
        *,
        body_timeout_seconds: float = BODY_TIMEOUT_SECONDS,
    ) -> None:
        self.app = app
        self.observer = observer or Observer()
        self.body_timeout_seconds = body_timeout_seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        if getrecursionlimit() != RECURSION_LIMIT:  # a library imported since raised it
            pin_recursion_limit()
        request_id, valid = parse_request_id(scope["headers"])
        scope.setdefault("state", {})[REQUEST_ID_KEY] = request_id
        context = REQUEST_ID.set(request_id)
        id_header = (b"x-request-id", request_id.encode("ascii"))
        status = 500
        announced = announced_length(scope["headers"])
        arrival = (
            None if announced == 0 else BodyArrival(receive, announced, self.body_timeout_seconds)
        )
        if arrival is not None:
            receive = arrival.receive

        async def send_with_id(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), id_header]
                # Answered before the body was read to its end: drop the rest and keep the
                # connection, or say it closes (the server then closes it after this answer).
                if arrival is not None and not await arrival.drain():
                    headers.append(CLOSE_HEADER)
                message = {**message, "headers": headers}
            await send(message)

        try:
            if not valid:
                await _send_error(send_with_id, 400, INVALID_REQUEST_ID, request_id)
            elif sum(len(n) + len(v) for n, v in scope["headers"]) > MAX_HEADER_BYTES:
                await _send_error(send_with_id, 400, HEADERS_TOO_LARGE, request_id)
            elif scope["method"] == "OPTIONS":
                await _send_error(
                    send_with_id,
                    405,
                    "Method not allowed; every endpoint takes POST",
                    request_id,
                    [(b"allow", b"POST")],
                )
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            try:
                # The router sets the matched route's template (`/trade/approve`), never a path.
                route = scope.get("path_template") or UNMATCHED_ROUTE
                self.observer.request(scope["method"], route, status, seconds)
                if log.isEnabledFor(logging.INFO):
                    _log_request(scope, status, request_id, seconds)
            finally:
                REQUEST_ID.reset(context)


def _log_request(scope: Any, status: int, request_id: str, seconds: float) -> None:
    # makeRecord + handle: the same record as log.info, without its stack walk (findCaller),
    # which is a measurable share of a cheap request.
    log.handle(
        log.makeRecord(
            log.name,
            logging.INFO,
            __file__,
            0,
            _LINE,
            (scope["method"], _printable(scope["path"]), status, request_id, seconds * 1000.0),
            None,
        )
    )


async def _send_error(
    send: Any,
    status: int,
    message: str,
    request_id: str,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = encode_error(status, message, request_id)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                *(extra_headers or ()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
