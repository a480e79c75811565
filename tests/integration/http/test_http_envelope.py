"""The envelope, request ids, and requests that fail before any use case runs."""

from __future__ import annotations

import pytest
from http_support import Api, assert_error, assert_ok

from walletcore_litestar.bodies import NOT_AN_INTEGER
from walletcore_litestar.middleware import parse_request_id


async def test_success_is_result_and_request_id(api: Api) -> None:
    response = await api.post("/prices")
    assert_ok(response)
    assert len(response.headers["x-request-id"]) == 24


async def test_inbound_request_id_is_echoed_in_body_and_header(api: Api) -> None:
    response = await api.post("/config", X_Request_Id="order-42 / retry 1")
    assert response.json()["requestId"] == "order-42 / retry 1"
    assert response.headers["x-request-id"] == "order-42 / retry 1"


async def test_request_id_is_echoed_on_errors_too(api: Api) -> None:
    response = await api.post("/trade", {"userId": "nope"}, X_Request_Id="abc-123")
    body = assert_error(response, 400)
    assert body["requestId"] == "abc-123"


@pytest.mark.parametrize("value", ["x" * 129, "caf\u00e9", "tab\there"])
async def test_a_bad_request_id_is_a_400_with_a_generated_one(api: Api, value: str) -> None:
    headers = [*api.headers.items(), ("X-Request-Id", value.encode("latin-1"))]
    response = await api.http.post("/prices", headers=headers)
    body = assert_error(response, 400)
    assert "X-Request-Id" in body["message"]
    assert body["requestId"] != value and len(body["requestId"]) == 24


async def test_request_id_of_128_characters_is_accepted(api: Api) -> None:
    assert (await api.post("/prices", X_Request_Id="r" * 128)).json()["requestId"] == "r" * 128


def test_request_id_sent_twice_is_refused() -> None:
    # The test transport merges repeated headers; real servers pass both: test the parser.
    rid, valid = parse_request_id([(b"x-request-id", b"a"), (b"x-request-id", b"b")])
    assert not valid and len(rid) == 24
    assert parse_request_id([(b"x-request-id", b"")])[1]  # empty: a fresh one, no error
    assert parse_request_id([(b"x-request-id", b" a b ")]) == (" a b ", True)


async def test_unknown_path_is_a_404_envelope(api: Api) -> None:
    assert_error(await api.post("/nothing-here"), 404, "Not found: no such endpoint")


async def test_unknown_path_without_a_token_is_a_404_envelope(api: Api) -> None:
    assert_error(await api.http.post("/nothing-here"), 404)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"])
async def test_wrong_method_is_a_405_envelope(api: Api, method: str) -> None:
    response = await api.http.request(method, "/prices", headers=api.headers)
    assert_error(response, 405, "Method not allowed; every endpoint takes POST")
    assert response.headers["allow"] == "POST"


def json_headers(api: Api) -> dict[str, str]:
    return {**api.headers, "content-type": "application/json"}


async def test_malformed_json_is_a_400(api: Api, user_id: str) -> None:
    response = await api.http.post("/trade", content=b'{"userId": ', headers=json_headers(api))
    assert_error(response, 400, "Request body is not valid JSON")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"userId": 5, "tradeId": "a"}', "Invalid request: userId must be a string"),
        ('{"tradeId": ["x"]}', "Invalid request: tradeId must be a string"),
        ('{"tradeId": "x", "extra": 1}', "Invalid request: unknown field `extra`"),
        ("[1, 2]", "Invalid request: the body must be a JSON object"),
        ('"text"', "Invalid request: the body must be a JSON object"),
    ],
)
async def test_wrong_shapes_are_a_400_with_a_clear_message(
    api: Api, body: str, message: str
) -> None:
    response = await api.http.post("/trade", content=body.encode(), headers=json_headers(api))
    assert_error(response, 400, message)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/trade", {"userId": "a" * 24}, "tradeId"),
        ("/trade/approve", {}, "tradeId"),
        ("/sell", {"cryptoAmount": "1"}, "assetId"),
        ("/create", {}, "password"),
        ("/extend", {"userId": "a" * 24}, "password"),
        ("/balance", {"userId": "a" * 24}, "assetId"),
        ("/txid", {"assetId": 2}, "txHash"),
        ("/fee", {"assetId": 2}, "recipient"),
        ("/send", {"assetId": 2, "recipient": "x", "password": "p"}, "amount"),
        ("/platform/send", {"assetId": 2, "amount": "1"}, "recipient"),
    ],
)
async def test_a_missing_required_field_is_a_400_naming_it(
    api: Api, path: str, body: dict[str, object], field: str
) -> None:
    response = await api.post(path, body, X_Request_Id="missing-1")
    assert_error(response, 400, f"Invalid request: {field} is required")


async def test_null_in_a_required_field_is_a_wrong_type(api: Api) -> None:
    response = await api.post("/trade", {"tradeId": None})
    assert_error(response, 400, "Invalid request: tradeId must be a string")


async def test_asset_id_of_the_wrong_type_is_a_400(api: Api, user_id: str) -> None:
    response = await api.post("/sell", {"userId": user_id, "assetId": True, "cryptoAmount": "1"})
    assert_error(response, 400, "Invalid request: assetId must be an integer or a string")
    response = await api.post("/sell", {"userId": user_id, "assetId": 1.5, "cryptoAmount": "1"})
    assert_error(response, 400, NOT_AN_INTEGER)


async def test_missing_body_where_one_is_needed_is_a_400(api: Api) -> None:
    assert_error(await api.post("/trade"), 400, "A JSON object body is required")


async def test_body_over_the_cap_is_a_400(api: Api) -> None:
    body = b'{"userId": "' + b"a" * 70_000 + b'"}'
    response = await api.http.post("/trade", content=body, headers=api.headers)
    assert_error(response, 400, "Request body too large; the limit is 65536 bytes")


@pytest.mark.parametrize("path", ["/prices", "/config"])
@pytest.mark.parametrize("body", [None, b"", b"{}", b"null", b" {} "])
async def test_no_body_endpoints_accept_nothing_or_an_empty_object(
    api: Api, path: str, body: bytes | None
) -> None:
    if body is None:
        response = await api.post(path)
    else:
        response = await api.http.post(path, content=body, headers=json_headers(api))
    assert_ok(response)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a": 1}', "Invalid request: unknown field `a`"),
        (b"[]", "Invalid request: the body must be a JSON object"),
        (b"{nope", "Request body is not valid JSON"),
    ],
)
async def test_no_body_endpoints_refuse_anything_else(api: Api, body: bytes, message: str) -> None:
    response = await api.http.post("/prices", content=body, headers=json_headers(api))
    assert_error(response, 400, message)


async def test_a_429_is_never_returned(api: Api) -> None:
    statuses = {(await api.post("/prices")).status_code for _ in range(200)}
    assert statuses == {200}
