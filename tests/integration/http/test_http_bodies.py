"""The one strict JSON reader (`walletcore_litestar.bodies`): every rule is a 400 in the
envelope with a clear message, on a body-taking endpoint and on a no-body one alike, and the
recursion limit a chain library raises is set back before any body is read."""

from __future__ import annotations

import sys

import pytest
from http_support import Api, assert_error, assert_ok

from walletcore_litestar.bodies import (
    DUPLICATE_KEY,
    INTEGER_TOO_LONG,
    MAX_JSON_DEPTH,
    NOT_AN_INTEGER,
    NOT_JSON,
    NOT_UTF8,
    TOO_DEEP,
    WRONG_CHARSET,
    WRONG_CONTENT_TYPE,
    check_depth,
    decode_body,
    field_name,
)
from walletcore_litestar.limits import RECURSION_LIMIT

JSON = "application/json"
PASSWORD = "correct horse battery staple"


def headers(api: Api, content_type: str | None = JSON) -> dict[str, str]:
    merged = dict(api.headers)
    if content_type is not None:
        merged["content-type"] = content_type
    return merged


def nested(depth: int, open_: str = "[", close: str = "]") -> bytes:
    return ('{"userId": ' + open_ * depth + close * depth + "}").encode()


CASES = [
    # (raw body, content type, message)
    (nested(30_000), JSON, TOO_DEEP),
    (nested(1_000), JSON, TOO_DEEP),
    (nested(MAX_JSON_DEPTH), JSON, TOO_DEEP),  # the outer object makes it one too many
    (('{"userId": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}").encode(), JSON, TOO_DEEP),
    (b'{"userId": "\xff\xfe"}', JSON, NOT_UTF8),
    (b'{"userId": "caf\xc3"}', JSON, NOT_UTF8),
    (b'{"userId": "a", "userId": "b"}', JSON, DUPLICATE_KEY),
    (b'{"assetId": 21.0}', JSON, NOT_AN_INTEGER),
    (b'{"assetId": 1e2}', JSON, NOT_AN_INTEGER),
    (b'{"assetId": NaN}', JSON, NOT_AN_INTEGER),
    (b'{"assetId": -Infinity}', JSON, NOT_AN_INTEGER),
    (b'{"assetId": ' + b"9" * 400 + b"}", JSON, INTEGER_TOO_LONG),
    (b'{"userId": "\\ud800"}', JSON, "Request body has an invalid \\u escape (a lone surrogate)"),
    (b"\xef\xbb\xbf{}", JSON, NOT_JSON),
    (b'{"userId": "a"}', "text/plain", WRONG_CONTENT_TYPE),
    (b'{"userId": "a"}', "application/x-www-form-urlencoded", WRONG_CONTENT_TYPE),
    (b'{"userId": "a"}', None, WRONG_CONTENT_TYPE),
    (b'{"userId": "a"}', "multipart/form-data; boundary=x", WRONG_CONTENT_TYPE),
    (b'{"userId": "a"}', "application/json; charset=latin-1", WRONG_CHARSET),
]


@pytest.mark.parametrize("path", ["/trade", "/sell", "/prices"])
@pytest.mark.parametrize(("body", "content_type", "message"), CASES)
async def test_every_rule_is_a_400_in_the_envelope(
    api: Api, path: str, body: bytes, content_type: str | None, message: str
) -> None:
    response = await api.http.post(path, content=body, headers=headers(api, content_type))
    assert_error(response, 400, message)


@pytest.mark.parametrize(
    "content_type", [JSON, "application/json; charset=utf-8", "application/merge-patch+json"]
)
async def test_json_content_types_are_read(api: Api, content_type: str) -> None:
    response = await api.http.post("/prices", content=b"{}", headers=headers(api, content_type))
    assert_ok(response)


async def test_a_long_unknown_field_name_is_not_echoed(api: Api) -> None:
    name = "<script>" + "x" * 60_000
    body = ('{"' + name + '": 1}').encode()
    for path in ("/trade", "/prices"):
        answer = assert_error(await api.http.post(path, content=body, headers=headers(api)), 400)
        assert answer["message"] == "Invalid request: unknown field (name not shown)"
    plain = assert_error(await api.post("/trade", {"tradeId": "x", "extra_1": 1}), 400)
    assert plain["message"] == "Invalid request: unknown field `extra_1`"


async def test_escaped_surrogate_pairs_and_unicode_are_fine(api: Api) -> None:
    # A properly escaped pair is one character; the core then judges the value (an id).
    body = b'{"userId": "\\ud83d\\ude00", "tradeId": "\xc3\xa9"}'
    answer = assert_error(await api.http.post("/trade", content=body, headers=headers(api)), 400)
    assert "userId" in answer["message"]


async def test_the_recursion_limit_is_pinned_after_chain_libraries_load(api: Api) -> None:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))  # imports eth_account
    assert created["userId"]
    sys.setrecursionlimit(100_000)  # as py_ecc does when a library is imported late
    try:
        response = await api.http.post("/trade", content=nested(30_000), headers=headers(api))
        assert_error(response, 400, TOO_DEEP)
        assert sys.getrecursionlimit() == RECURSION_LIMIT
    finally:
        sys.setrecursionlimit(RECURSION_LIMIT)


def test_depth_counts_brackets_outside_strings_only() -> None:
    check_depth(b'{"a": "' + b"[" * 1000 + b'"}')
    check_depth(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)
    with pytest.raises(Exception, match="nested too deeply"):
        check_depth(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))
    assert decode_body(b'{"a": "[[[[\\"]]"}') == {"a": '[[[["]]'}


def test_field_names_echoed_only_when_short_and_plain() -> None:
    assert field_name("assetId") == "`assetId`"
    assert field_name("x" * 65) == "(name not shown)"
    assert field_name("<b>") == "(name not shown)"
    assert field_name("a\nb") == "(name not shown)"


async def test_headers_over_the_application_limit_are_a_400(api: Api) -> None:
    from walletcore_litestar.middleware import HEADERS_TOO_LARGE, MAX_HEADER_BYTES

    big = {**api.headers, "x-padding": "a" * MAX_HEADER_BYTES}
    answer = assert_error(await api.http.post("/prices", headers=big), 400, HEADERS_TOO_LARGE)
    assert answer["requestId"]
    assert_ok(await api.http.post("/prices", headers={**api.headers, "x-padding": "a" * 8000}))


@pytest.mark.parametrize("body", [b"\x0c", b"\x0b", b" \x0c\n"])
@pytest.mark.parametrize("path", ["/prices", "/config", "/platform/addresses"])
async def test_a_no_body_endpoint_refuses_whitespace_json_does_not_know(
    api: Api, path: str, body: bytes
) -> None:
    """JSON's whitespace is space, tab, CR and LF: a form feed is not an empty body."""
    assert_error(await api.http.post(path, content=body, headers=headers(api)), 400)


@pytest.mark.parametrize("body", [b" ", b"\r\n\t "])
async def test_a_no_body_endpoint_takes_json_whitespace_as_no_body(api: Api, body: bytes) -> None:
    assert_ok(await api.http.post("/prices", content=body, headers=headers(api)))
