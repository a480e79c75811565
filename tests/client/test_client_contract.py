"""The client against the served OpenAPI document: one method per operation in both clients,
and every model's fields the response schema's properties (the required ones without a
default), amounts `Decimal`, timestamps `datetime`."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from client_support import Sandbox

from walletcore_client import AsyncClient, Client, models
from walletcore_client._core import OPERATIONS

#: the model of each result schema
MODELS: dict[str, type] = {
    "AuthResult": models.Token,
    "FiatPrices": models.FiatPrices,
    "ConfigAsset": models.ConfigAsset,
    "ClientConfig": models.ClientConfig,
    "TradeQuote": models.TradeQuote,
    "SettlementView": models.Settlement,
    "TradeView": models.Trade,
    "CreatedWallet": models.CreatedWallet,
    "WalletAddresses": models.WalletAddresses,
    "TransactionRow": models.Transaction,
    "WalletInfo": models.WalletInfo,
    "TronFee": models.TronFee,
    "SendResult": models.SendResult,
    "HeldResult": models.HeldSend,
    "EventView": models.Event,
    "EventPageView": models.EventPage,
    "DepositView": models.Deposit,
    "DeliveryView": models.Delivery,
    "PolicyVersionView": models.PolicyVersion,
    "AllowlistView": models.AllowlistEntry,
    "PolicyView": models.Policy,
    "ApprovalView": models.Approval,
}
DECIMAL_PATTERN = "^[0-9]+(\\.[0-9]+)?$"


@pytest.fixture(scope="module")
def document(sandbox: Sandbox) -> dict[str, Any]:
    answer = httpx.get(f"{sandbox.base_url}/schema/openapi.json", timeout=10)
    assert answer.status_code == 200
    return answer.json()  # type: ignore[no-any-return]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].split("/")[-1]]
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(document, schema["allOf"][0])
    return schema


def _options(document: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolve(document, schema)
    return [_resolve(document, one) for one in schema.get("oneOf", [schema])]


def _bare(hint: Any) -> set[Any]:
    """The types a field's hint allows, None left out."""
    if typing.get_origin(hint) in (typing.Union, __import__("types").UnionType):
        return {arg for arg in typing.get_args(hint) if arg is not type(None)}
    return {hint}


def test_every_operation_has_a_method_on_both_clients(document: dict[str, Any]) -> None:
    served = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert all(method == "post" for _, method in served)
    assert {path for path, _ in served} == set(OPERATIONS)
    assert len(OPERATIONS) >= 31
    for op in OPERATIONS.values():
        for cls in (Client, AsyncClient):
            assert callable(getattr(cls, op.method, None)), (cls.__name__, op.method)
        assert inspect.iscoroutinefunction(getattr(AsyncClient, op.method))
        assert not inspect.iscoroutinefunction(getattr(Client, op.method))


def test_the_send_operations_require_a_request_id(document: dict[str, Any]) -> None:
    for path, op in OPERATIONS.items():
        parameters = document["paths"][path]["post"].get("parameters", [])
        required = {p["name"].lower() for p in parameters if p.get("required")}
        assert ("x-request-id" in required) == op.needs_request_id, path


@pytest.mark.parametrize("schema_name", sorted(MODELS))
def test_each_model_is_its_schema(document: dict[str, Any], schema_name: str) -> None:
    model = MODELS[schema_name]
    schema = document["components"]["schemas"][schema_name]
    hints = typing.get_type_hints(model)
    wire = {
        f.name: f
        for f in dataclasses.fields(model)
        if f.metadata.get(models.WIRE, True) is not False
    }
    assert set(wire) == set(schema["properties"]), schema_name
    required = {name for name, f in wire.items() if f.default is dataclasses.MISSING}
    assert required == set(schema.get("required", [])), schema_name
    for name, prop in schema["properties"].items():
        options = _options(document, prop)
        allowed = _bare(hints[name])
        nullable = any(o.get("type") == "null" for o in options)
        takes_none = hints[name] is type(None) or type(None) in typing.get_args(hints[name])
        if name in required:
            assert nullable == takes_none, (schema_name, name)
        else:  # absent on the wire: None on the model
            assert takes_none and wire[name].default is None, (schema_name, name)
        for option in options:
            if option.get("pattern") == DECIMAL_PATTERN:
                assert Decimal in allowed, (schema_name, name)
            elif "T[0-9]{2}" in option.get("pattern", ""):
                assert datetime in allowed, (schema_name, name)
            elif option.get("type") == "number":
                # money is Decimal (prices); a duration (a delivery's seconds) is float
                assert allowed == ({Decimal} if schema_name == "FiatPrices" else {float})
            elif option.get("type") == "integer":
                assert int in allowed, (schema_name, name)
            elif option.get("type") == "array":
                assert any(typing.get_origin(a) is tuple for a in allowed), (schema_name, name)


def test_every_result_is_modelled(document: dict[str, Any]) -> None:
    """Every object schema of a 2xx answer has its model (or is a map: prices, addresses)."""
    maps = {"ChainAddresses", "PricesEnvelope"}
    named: set[str] = set()

    def walk(schema: dict[str, Any]) -> None:
        if "$ref" in schema:
            name = schema["$ref"].split("/")[-1]
            if name in named:
                return
            named.add(name)
            schema = document["components"]["schemas"][name]
        for key in ("oneOf", "anyOf", "allOf"):
            for one in schema.get(key, []):
                walk(one)
        for one in schema.get("properties", {}).values():
            walk(one)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"])
        if isinstance(schema.get("additionalProperties"), dict):
            walk(schema["additionalProperties"])

    for ops in document["paths"].values():
        for status, answer in ops["post"]["responses"].items():
            if status.startswith("2"):
                walk(answer["content"]["application/json"]["schema"])
    schemas = document["components"]["schemas"]
    objects = {
        name
        for name in named
        if schemas[name].get("type") == "object" and not name.endswith("Envelope")
    }
    assert objects - maps == set(MODELS)
