"""The OpenAPI document: served, and describing the envelope, decimals, enums, required
fields and headers. (Every response of the HTTP suite is also validated against it: see
`http_support.judge_responses`.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import DOCUMENT_PATH, Api, DocumentMismatch, served_document
from litestar.testing import AsyncTestClient

from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_litestar import create_app

PATHS = {
    "/auth",
    "/prices",
    "/config",
    "/sell",
    "/order",
    "/trade/approve",
    "/trade/collect",
    "/trade/cancel",
    "/trade",
    "/trades",
    "/create",
    "/extend",
    "/addresses",
    "/platform/addresses",
    "/balance",
    "/info",
    "/transactions",
    "/txid",
    "/fee",
    "/send",
    "/platform/balance",
    "/platform/info",
    "/platform/transactions",
    "/platform/txid",
    "/platform/fee",
    "/platform/send",
    "/events",
    "/deposits",
    "/webhooks/deliveries",
    "/policy",
    "/approvals",
}
#: The api client's own endpoints: no user, `X-USER-ID` is not theirs.
CLIENT_SCOPED = {"/auth", "/prices", "/config", "/create", "/webhooks/deliveries"}
CLIENT_SCOPED |= {"/policy", "/approvals"}
#: A send a withdrawal policy holds answers 202 with its own envelope.
HELD = {"/send", "/platform/send"}


async def document(api: Api) -> dict[str, Any]:
    response = await api.http.get(DOCUMENT_PATH)
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


async def test_every_endpoint_is_a_documented_post(api: Api) -> None:
    doc = await document(api)
    assert set(doc["paths"]) == PATHS
    for path, item in doc["paths"].items():
        assert set(item) == {"post"}, path
        operation = item["post"]
        assert "200" in operation["responses"] and "400" in operation["responses"]
        for status, response in operation["responses"].items():
            ref = response["content"]["application/json"]["schema"]["$ref"]
            if status == "202":
                assert path in HELD and ref == "#/components/schemas/HeldEnvelope"
            elif status != "200":
                assert ref == "#/components/schemas/ErrorEnvelope"
            assert "X-Request-Id" in response["headers"]
        names = {p["name"] for p in operation.get("parameters", [])}
        assert "X-Request-Id" in names
        assert ("X-USER-ID" in names) == (
            path not in CLIENT_SCOPED and not path.startswith("/platform/")
        )
        assert (operation.get("security") == [{"bearer": []}]) == (path != "/auth")


async def test_the_envelopes(api: Api) -> None:
    schemas = (await document(api))["components"]["schemas"]
    error = schemas["ErrorEnvelope"]
    assert sorted(error["required"]) == ["error", "message", "requestId"]
    assert error["properties"]["error"]["pattern"] == "^[45][0-9]{2}$"
    trade = schemas["TradeEnvelope"]
    assert sorted(trade["required"]) == ["requestId", "result"]


async def test_decimals_are_patterned_strings_and_enums_are_listed(api: Api) -> None:
    schemas = (await document(api))["components"]["schemas"]
    view = schemas["TradeView"]["properties"]
    assert view["price"]["type"] == "string" and view["price"]["pattern"] == r"^[0-9]+(\.[0-9]+)?$"
    assert view["cryptoAmount"]["oneOf"][1] == {"type": "null"}
    assert set(schemas["TradeStatus"]["enum"]) == {
        "open",
        "approved",
        "executing",
        "completed",
        "failed",
        "expired",
        "cancelled",
    }
    assert set(schemas["Side"]["enum"]) == {"buy", "sell"}
    assert view["assetId"]["enum"] == [1, 2, 21, 22, 3, 31, 32, 4, 41, 42, 5, 51, 52, 6, 61, 62]
    quote = schemas["QuoteRequest"]
    assert quote["additionalProperties"] is False
    asset = quote["properties"]["assetId"]["oneOf"]
    assert asset[0]["type"] == "integer"
    assert asset[1]["pattern"] == "^0*(?:1|2|21|22|3|31|32|4|41|42|5|51|52|6|61|62)$"
    assert len(quote["properties"]["fiat"]["oneOf"][0]["enum"]) == 10
    prices = schemas["PricesEnvelope"]["properties"]["result"]
    assert prices["additionalProperties"]["$ref"] == "#/components/schemas/FiatPrices"
    assert schemas["FiatPrices"]["properties"]["USD"]["type"] == "number"


@pytest.mark.parametrize("path", ["/prices", "/policy"])
async def test_no_body_endpoints_document_an_optional_empty_object(api: Api, path: str) -> None:
    doc = await document(api)
    body = doc["paths"][path]["post"]["requestBody"]
    assert body["required"] is False
    schema = body["content"]["application/json"]["schema"]["oneOf"][0]
    assert schema["additionalProperties"] is False and schema["properties"] == {}


#: Required body fields by path: what the body cannot do without. `userId` is never among
#: them: the X-USER-ID header can carry it instead.
REQUIRED = {
    "/sell": ["assetId"],
    "/order": ["assetId"],
    "/trade/approve": ["tradeId"],
    "/trade/collect": ["password", "tradeId"],
    "/trade/cancel": ["tradeId"],
    "/trade": ["tradeId"],
    "/trades": [],
    "/create": ["password"],
    "/extend": ["password"],
    "/addresses": [],
    "/balance": ["assetId"],
    "/info": ["assetId"],
    "/transactions": ["assetId"],
    "/txid": ["assetId", "txHash"],
    "/fee": ["assetId", "recipient"],
    "/send": ["amount", "assetId", "password", "recipient"],
    "/platform/balance": ["assetId"],
    "/platform/info": ["assetId"],
    "/platform/transactions": ["assetId"],
    "/platform/txid": ["assetId", "txHash"],
    "/platform/fee": ["assetId", "recipient"],
    "/platform/send": ["amount", "assetId", "recipient"],
    "/approvals": [],
}


def body_schema(doc: dict[str, Any], path: str) -> dict[str, Any]:
    ref = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return doc["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]  # type: ignore[no-any-return]


async def test_request_bodies_list_their_required_fields(api: Api) -> None:
    doc = await document(api)
    for path, required in REQUIRED.items():
        schema = body_schema(doc, path)
        assert sorted(schema["required"]) == required, path
        assert doc["paths"][path]["post"]["requestBody"]["required"] is True
        user = schema["properties"].get("userId")
        if path.startswith("/platform/") or path in ("/create", "/approvals"):
            assert user is None, path
        else:
            assert "X-USER-ID" in user["oneOf"][0]["description"], path
    # exactly one amount on a quote: a rule across two fields
    quote = body_schema(doc, "/sell")
    assert [branch["required"] for branch in quote["oneOf"]] == [["cryptoAmount"], ["fiatAmount"]]


async def test_collecting_a_sell_is_documented(api: Api) -> None:
    doc = await document(api)
    operation = doc["paths"]["/trade/collect"]["post"]
    assert operation["summary"].startswith("Collect a completed sell's coins to the desk")
    assert "/trade/approve" not in operation["summary"]
    for words in ("without `password`", "platform wallet", "409", "Asked again"):
        assert words in operation["description"], words
    assert {"200", "400", "401", "404", "409"} <= set(operation["responses"])
    result = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert result == "#/components/schemas/TradeEnvelope"
    password = body_schema(doc, "/trade/collect")["properties"]["password"]
    assert (password["type"], password["minLength"], password["maxLength"]) == ("string", 1, 256)
    assert "never stored" in password["description"]


async def test_approving_a_sell_documents_its_password(api: Api) -> None:
    doc = await document(api)
    approve = doc["paths"]["/trade/approve"]["post"]
    assert "password" in approve["description"] and "/trade/collect" in approve["description"]
    password = body_schema(doc, "/trade/approve")["properties"]["password"]["oneOf"]
    assert password[1] == {"type": "null"}  # optional: a sell approved without it waits
    assert (password[0]["type"], password[0]["minLength"], password[0]["maxLength"]) == (
        "string",
        1,
        256,
    )
    for words in ("a sell only", "/trade/collect", "Never stored"):
        assert words in password[0]["description"], words


async def test_a_trade_documents_its_settlement(api: Api) -> None:
    schemas = (await document(api))["components"]["schemas"]
    field = schemas["TradeView"]["properties"]["settlement"]
    assert field["allOf"] == [{"$ref": "#/components/schemas/SettlementView"}]
    assert "absent on a trade never approved" in field["description"]
    assert "settlement" not in schemas["TradeView"]["required"]
    view = schemas["SettlementView"]
    assert sorted(view["required"]) == ["amount", "status", "updatedAt"]
    assert set(view["properties"]) == {"status", "amount", "updatedAt", "txHash", "reason"}
    for name, prop in view["properties"].items():
        assert prop["description"], name
    assert view["properties"]["amount"]["pattern"] == r"^[0-9]+(\.[0-9]+)?$"
    assert set(schemas["SettlementStatus"]["enum"]) == {
        "reserved",
        "awaiting_password",
        "queued",
        "short",
        "sent",
        "settled",
        "failed",
        "released",
    }
    described = view["properties"]["status"]["description"]
    assert all(status in described for status in schemas["SettlementStatus"]["enum"])


@pytest.mark.parametrize("path", ["/send", "/platform/send"])
async def test_a_send_requires_its_idempotency_key(api: Api, path: str) -> None:
    parameters = (await document(api))["paths"][path]["post"]["parameters"]
    key = next(p for p in parameters if p["name"] == "X-Request-Id")
    assert key["required"] is True and key["in"] == "header"
    assert key["schema"]["minLength"] == 1


async def test_every_object_is_closed(api: Api) -> None:
    for name, schema in (await document(api))["components"]["schemas"].items():
        if schema.get("type") == "object":
            assert schema["additionalProperties"] is False, name


async def test_every_error_example_is_an_error_envelope_of_its_status(api: Api) -> None:
    doc = await document(api)
    judge = served_document((await api.http.get(DOCUMENT_PATH)).content)
    envelope = judge.validator({"$ref": "#/components/schemas/ErrorEnvelope"})
    for path, item in doc["paths"].items():
        for status, response in item["post"]["responses"].items():
            if status in ("200", "202"):
                continue
            examples = response["content"]["application/json"]["examples"]
            assert examples, (path, status)
            for example in examples.values():
                assert envelope.is_valid(example["value"]), (path, status, example)
                assert example["value"]["error"] == status, (path, status)


async def test_one_deployment_serves_the_same_document_byte_for_byte(
    api: Api, tmp_path: Path
) -> None:
    """Nothing in it is generated at random (Litestar's own examples are off): two apps of
    the same deployment serve the same bytes."""
    again = create_container(Settings(home=tmp_path / "again", repo="memory"))
    async with AsyncTestClient(create_app(again)) as other:
        fetched = await other.get(DOCUMENT_PATH)
    assert fetched.status_code == 200
    assert fetched.content == (await api.http.get(DOCUMENT_PATH)).content
    envelope = (await document(api))["components"]["schemas"]["ErrorEnvelope"]
    assert "examples" not in envelope
    assert not any("examples" in p for p in envelope["properties"].values())


async def test_the_judge_refuses_what_the_document_does_not_say(api: Api) -> None:
    judge = served_document((await api.http.get(DOCUMENT_PATH)).content)
    request = httpx.Request("POST", "http://testserver.local/trade")
    rid = {"x-request-id": "r1"}
    undocumented = httpx.Response(
        503, json={"message": "m", "error": "503", "requestId": "r1"}, headers=rid, request=request
    )
    with pytest.raises(DocumentMismatch, match="status 503 is not documented"):
        judge.check("POST", "/trade", undocumented)
    extra = httpx.Response(
        404, json={"message": "m", "error": "404", "requestId": "r1", "x": 1}, headers=rid
    )
    with pytest.raises(DocumentMismatch, match="does not match its schema"):
        judge.check("POST", "/trade", extra)
    not_a_decimal = httpx.Response(200, json={"result": "1e3", "requestId": "r1"}, headers=rid)
    with pytest.raises(DocumentMismatch, match="does not match its schema"):
        judge.check("POST", "/balance", not_a_decimal)


async def test_an_interactive_page_is_served_next_to_the_document(api: Api) -> None:
    page = await api.http.get("/schema")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert DOCUMENT_PATH in page.text  # the page loads the document served here
