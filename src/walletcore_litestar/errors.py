"""The one exception handler: every error, domain or framework, becomes the error envelope.

- `DomainError`: its own `status` and safe `message` (the core decides both).
- Litestar's request errors: 400 with a clear message (bad JSON, wrong types, unknown
  fields, body over the cap), 404 for an unknown path, 405 for a wrong method.
- Anything else: 500 `Internal error`, logged with its traceback, never shown.

A 429 is never produced; a 413 from the body cap is answered as a 400, per the contract.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    SerializationException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from walletcore.domain.errors import DomainError
from walletcore_litestar.bodies import field_name
from walletcore_litestar.envelope import error_body, request_id_of
from walletcore_litestar.operations import OPERATIONS_PATHS

log = logging.getLogger("walletcore.http")

#: Request bodies larger than this are refused (a 400) before they are parsed.
MAX_BODY_BYTES = 64 * 1024

#: The longest validation message answered (it may quote the client's input).
MAX_MESSAGE_CHARS = 300

BODY_TOO_LARGE = f"Request body too large; the limit is {MAX_BODY_BYTES} bytes"
BODY_REQUIRED = "A JSON object body is required"
NOT_FOUND = "Not found: no such endpoint"
METHOD_NOT_ALLOWED = "Method not allowed; every endpoint takes POST"
INTERNAL = "Internal error"


def status_and_message(exc: Exception) -> tuple[int, str]:
    """The mapping, in one place."""
    if isinstance(exc, DomainError):
        return exc.status, exc.message
    if isinstance(exc, RequestEntityTooLarge):
        return 400, BODY_TOO_LARGE
    if isinstance(exc, ValidationException):
        return 400, _validation_message(exc)
    if isinstance(exc, NotFoundException):
        return 404, NOT_FOUND
    if isinstance(exc, MethodNotAllowedException):
        return 405, METHOD_NOT_ALLOWED
    if isinstance(exc, HTTPException) and 400 <= exc.status_code < 500 and exc.status_code != 429:
        # Litestar's other client errors: a malformed JSON body, a bad Content-Length.
        if isinstance(exc.__cause__, SerializationException):  # msgspec could not decode it
            return 400, "Request body is not valid JSON"
        return 400, "Invalid request"
    return 500, INTERNAL


def _validation_message(exc: ValidationException) -> str:
    problems = exc.extra if isinstance(exc.extra, list) else []
    parts: list[str] = []
    for problem in problems[:5]:
        if not isinstance(problem, dict):
            continue
        key, text = str(problem.get("key", "")), str(problem.get("message", ""))
        if problem.get("source") not in (None, "body"):
            parts.append(f"{key}: {text}" if key else text)
        elif key == "data" and text.startswith("Expected `object"):
            parts.append("the body must be a JSON object")
        elif key == "data" and text.startswith("Object contains unknown field"):
            # The name is the client's: echoed only when short and plain (bodies.field_name).
            name = text.removeprefix("Object contains unknown field").strip().strip("`")
            parts.append(f"unknown field {field_name(name)}")
        elif key == "data" and text.startswith(_MISSING):
            # The name is one of ours (a required field of the body's Struct).
            parts.append(f"{text.removeprefix(_MISSING).strip().strip('`')} is required")
        elif key == "data":
            return BODY_REQUIRED
        else:
            parts.append(_field_message(key, text))
    if not parts:
        return "Invalid request"
    message = "Invalid request: " + "; ".join(parts)
    # Parts can quote what the client sent: the answer never grows with the input.
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "..."


_MISSING = "Object missing required field"
_EXPECTED = re.compile(r"\AExpected `(?P<wanted>[^`]+)`, got `(?P<got>[^`]+)`")
_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "object": "a JSON object",
    "array": "an array",
}


def _field_message(key: str, text: str) -> str:
    """`userId: Expected `str | null`, got `int`` -> `userId must be a string`."""
    match = _EXPECTED.match(text)
    if match is None:
        return f"{key}: {text}"
    wanted = [t for t in match.group("wanted").split(" | ") if t != "null"]
    names = [_TYPE_NAMES.get(t, t) for t in wanted]
    return f"{key} must be {' or '.join(names)}"


#: Seconds between two full tracebacks of the same error on the same path: a request that
#: triggers a bug must not become a lever to flood the log.
TRACEBACK_INTERVAL_SECONDS = 60.0
_last_traceback: dict[tuple[str, str], float] = {}


def _traceback_due(kind: str, path: str) -> bool:
    key, now = (kind, path[:256]), time.monotonic()
    last = _last_traceback.get(key)
    if last is not None and now - last < TRACEBACK_INTERVAL_SECONDS:
        return False
    if len(_last_traceback) >= 1024:
        _last_traceback.clear()
    _last_traceback[key] = now
    return True


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    status, message = status_and_message(exc)
    request_id = request_id_of(request.scope)
    if status >= 500 and not isinstance(exc, DomainError):
        path = request.scope.get("path", "?")
        log.error(
            "unhandled %s on %s (requestId=%s)",
            type(exc).__name__,
            path[:256],
            request_id,
            exc_info=exc if _traceback_due(type(exc).__name__, path) else None,
        )
    headers = None
    if isinstance(exc, MethodNotAllowedException):
        if request.scope.get("path") in OPERATIONS_PATHS:  # the GET endpoints (health, metrics)
            message, headers = "Method not allowed; this endpoint takes GET", {"Allow": "GET"}
        else:
            headers = {"Allow": "POST"}
    return Response(
        content=error_body(status, message, request_id),
        status_code=status,
        media_type=MediaType.JSON,
        headers=headers,
    )
