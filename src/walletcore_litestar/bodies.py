"""Request bodies: one strict JSON reader for every endpoint, and the no-body endpoints.

Every body goes through `decode_body` before any handler, validator or Litestar's own
conversion sees it (`StrictRequest.json`, and `require_empty_body` for the endpoints that
take none). It refuses, as a 400 with a clear message and nothing changed:

- a `Content-Type` other than `application/json` (or `application/*+json`), and a charset
  other than UTF-8;
- bytes that are not UTF-8, and `\\uD800`-style escapes that leave a lone surrogate (no
  database or hash can store those);
- nesting deeper than `MAX_JSON_DEPTH`, counted *before* the decoder runs: a C decoder
  recurses per level, and a library that raises the interpreter's recursion limit (py_ecc
  does, to 100,000) turns a deep body into a stack overflow that kills the process. The
  count is linear in the body's size whatever its bytes (`check_depth`): it runs on the
  event loop, so a check that can backtrack would let one request stall every other
  request of its worker;
- the same key twice in one object (which of the two would win is parser-dependent);
- integers of more than 18 digits, numbers with a fraction or an exponent, NaN and Infinity: no request field is a float
  (amounts are decimal strings), and `21.0` must not pass as the integer 21.

The decoder is the standard library's (`json`), because it exposes the hooks these rules
need (pairs, constants, floats); bodies are capped at 64 KiB, so its speed is not a concern.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from litestar import Request
from litestar.datastructures import State
from litestar.exceptions import InternalServerException
from litestar.types import Empty

from walletcore.domain.errors import InvalidRequest

#: The deepest nesting of arrays and objects accepted in a body (every wire shape is 1 deep).
MAX_JSON_DEPTH = 32
#: The most digits in a JSON integer (ids and asset ids are far shorter; storage is 64-bit).
MAX_INTEGER_DIGITS = 18
#: The longest field name echoed in a message; longer or odd names are not echoed.
MAX_ECHOED_NAME = 64

NOT_JSON = "Request body is not valid JSON"
NOT_UTF8 = "Request body is not valid UTF-8"
BODY_UNREADABLE = "Request body could not be read: malformed chunked encoding or cut short"
NOT_AN_OBJECT = "Invalid request: the body must be a JSON object"
TOO_DEEP = f"Request body is nested too deeply; the limit is {MAX_JSON_DEPTH} levels"
WRONG_CONTENT_TYPE = "Content-Type must be application/json"
WRONG_CHARSET = "Content-Type charset must be utf-8"
INTEGER_TOO_LONG = f"Invalid request: integers have at most {MAX_INTEGER_DIGITS} digits"
DUPLICATE_KEY = "Invalid request: a key appears twice in one object"
NOT_AN_INTEGER = (
    'Invalid request: numbers must be integers; send amounts as decimal strings, e.g. "1.5"'
)

#: A string literal, from its opening quote to its closing one, or to the end of the body
#: when it is never closed. Possessive (`++`, `*+`): no byte is ever read twice, and an
#: unterminated string is one match, not a failure retried from every later quote (the
#: backtracking form took seconds on 64 KiB of escaped quotes).
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
#: Every byte that is not a bracket, deleted before the count (`bytes.translate`).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: An opening bracket counts +1, a closing one -1 (as signed bytes: `array("b")`).
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ECHOABLE_NAME = re.compile(rf"\A[A-Za-z0-9_.\-]{{1,{MAX_ECHOED_NAME}}}\Z")


class _Refused(Exception):
    """Raised inside the decoder's hooks; turned into the 400 it carries."""

    def __init__(self, message: str) -> None:
        self.message = message


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _Refused(DUPLICATE_KEY)
    return value


def _no_float(_: str) -> Any:
    raise _Refused(NOT_AN_INTEGER)


def _no_constant(_: str) -> Any:
    raise _Refused(NOT_AN_INTEGER)


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INTEGER_DIGITS + (text[0] == "-"):
        raise _Refused(INTEGER_TOO_LONG)
    return int(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_float=_no_float,
    parse_constant=_no_constant,
    parse_int=_bounded_int,
)


def check_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse nesting deeper than `limit`, without recursing and in time linear in the
    body's size, whatever its bytes.

    Fast path: a body with no more brackets than the limit cannot be deeper. Otherwise the
    string literals are blanked out in one pass (brackets inside strings do not nest), the
    brackets kept as +1 / -1 steps and their running sum's peak taken, all in C. The peak
    bounds the depth the decoder could reach before it meets its first error, so a
    malformed body is left for the decoder to refuse.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return
    steps = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS).translate(_BRACKET_STEPS)
    if max(accumulate(array("b", steps)), default=0) > limit:
        raise InvalidRequest(TOO_DEEP)


def check_content_type(media_type: str, params: dict[str, str]) -> None:
    media = media_type.strip().lower()
    if not (
        media == "application/json"
        or (media.startswith("application/") and media.endswith("+json"))
    ):
        raise InvalidRequest(WRONG_CONTENT_TYPE)
    charset = params.get("charset")
    if charset is not None and charset.strip().strip('"').lower() not in ("utf-8", "utf8"):
        raise InvalidRequest(WRONG_CHARSET)


def decode_body(body: bytes) -> Any:
    """The JSON value of `body` under the rules above, or a 400 (`InvalidRequest`)."""
    check_depth(body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(NOT_UTF8) from None
    if text.startswith("\ufeff"):  # a byte-order mark is not JSON (RFC 8259, section 8.1)
        raise InvalidRequest(NOT_JSON)
    try:
        value = _DECODER.decode(text)
    except _Refused as refused:
        raise InvalidRequest(refused.message) from None
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise InvalidRequest(NOT_JSON) from None
    if _SURROGATE_ESCAPE.search(text) is not None:
        try:  # escaped pairs were joined by the decoder; a lone half is left over
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(
                "Request body has an invalid \\u escape (a lone surrogate)"
            ) from None
    return value


def field_name(name: object) -> str:
    """A client-sent field name fit to echo in a message: short plain names only."""
    text = str(name)
    return f"`{text}`" if _ECHOABLE_NAME.match(text) else "(name not shown)"


class StrictRequest(Request[Any, Any, State]):
    """Litestar's request with `json()` read by `decode_body` (the app's `request_class`)."""

    async def body(self) -> bytes:
        try:
            return await super().body()
        except InternalServerException:
            # The server ended the body early: a malformed chunk, or the client hung up.
            # Litestar calls that a 500; it is the request's fault, and nothing was read.
            raise InvalidRequest(BODY_UNREADABLE) from None

    async def json(self) -> Any:
        if self._json is Empty:
            body = await self.body()
            if not body:
                value: Any = None
            else:
                check_content_type(*self.content_type)
                value = decode_body(body)
            self._json = self._connection_state.json = value
        return self._json


#: What JSON counts as whitespace (RFC 8259); `bytes.strip()` also strips \x0b and \x0c.
JSON_WHITESPACE = b" \t\r\n"


def _announces_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-length" and value.strip() not in (b"0", b""):
            return True
        if name == b"transfer-encoding":
            return True
    return False


async def require_empty_body(request: Request[Any, Any, Any]) -> None:
    """Endpoints that take no body: accept none, `{}` or `null`, refuse anything else.

    Checked by hand rather than through a `data` parameter, because these are the hottest
    routes (`/prices`, `/config`) and most calls carry no body at all: the body is read
    only when the headers announce one. OpenAPI documents it (`openapi.finish_openapi`).
    """
    if not _announces_body(request.scope["headers"]):
        return
    body = await request.body()  # honours the body size cap
    if not body.strip(JSON_WHITESPACE):  # only JSON's own whitespace: a form feed is a 400
        return
    value = await request.json()
    if value is None or value == {}:
        return
    if isinstance(value, dict):
        raise InvalidRequest(f"Invalid request: unknown field {field_name(next(iter(value)))}")
    raise InvalidRequest(NOT_AN_OBJECT)
