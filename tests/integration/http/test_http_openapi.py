"""The OpenAPI document: served, and describing the envelope, decimals and enums."""

from __future__ import annotations

from typing import Any

from http_support import Api

PATHS = {
    "/auth",
    "/prices",
    "/config",
    "/sell",
    "/order",
    "/trade/approve",
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
}


async def document(api: Api) -> dict[str, Any]:
    response = await api.http.get("/schema/openapi.json")
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
            if status != "200":
                assert ref == "#/components/schemas/ErrorEnvelope"
            assert "X-Request-Id" in response["headers"]
        names = {p["name"] for p in operation.get("parameters", [])}
        assert "X-Request-Id" in names
        assert ("X-USER-ID" in names) == (
            path not in {"/auth", "/prices", "/config", "/create"}
            and not path.startswith("/platform/")
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
    assert asset[0]["type"] == "integer" and asset[1]["pattern"] == "^[0-9]{1,9}$"
    assert len(quote["properties"]["fiat"]["oneOf"][0]["enum"]) == 10
    prices = schemas["PricesEnvelope"]["properties"]["result"]
    assert prices["additionalProperties"]["$ref"] == "#/components/schemas/FiatPrices"
    assert schemas["FiatPrices"]["properties"]["USD"]["type"] == "number"


async def test_no_body_endpoints_document_an_optional_empty_object(api: Api) -> None:
    doc = await document(api)
    body = doc["paths"]["/prices"]["post"]["requestBody"]
    assert body["required"] is False
    schema = body["content"]["application/json"]["schema"]["oneOf"][0]
    assert schema["additionalProperties"] is False and schema["properties"] == {}
