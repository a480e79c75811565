"""The OpenAPI document lists the assets the container's catalog serves (openapi.
describe_catalog): with the contract's catalog it is the contract's document; with an asset
a plugin adds, its id, its chain and its decimal places are in every place that names
assets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from walletcore.container import create_container
from walletcore.domain.assets import CONTRACT_ASSETS, Asset, AssetKind, Chain
from walletcore.domain.catalog import Catalog
from walletcore.settings import Settings
from walletcore_litestar.app import create_app
from walletcore_litestar.wire import amount_pattern

BASE = Chain("BASECHAIN")
#: more places than any contract asset: the amount patterns must widen
BASE_COIN = Asset(8453, BASE, "BASE", AssetKind.NATIVE, None, 21)


def document(tmp_path: Path, catalog: Catalog | None = None) -> dict[str, Any]:
    overrides = {} if catalog is None else {"catalog": catalog}
    container = create_container(Settings(home=tmp_path, repo="memory"), **overrides)
    raw = msgspec.json.encode(create_app(container).openapi_schema.to_schema())
    found: dict[str, Any] = json.loads(raw)
    return found


def everywhere(value: Any, key: str) -> list[Any]:
    """Every value of `key` in the document, at any depth."""
    if isinstance(value, dict):
        return [
            *([value[key]] if key in value else []),
            *(x for v in value.values() for x in everywhere(v, key)),
        ]
    if isinstance(value, list):
        return [x for v in value for x in everywhere(v, key)]
    return []


def test_an_added_asset_is_named_wherever_the_contract_assets_are(tmp_path: Path) -> None:
    contract = document(tmp_path / "a")
    served = document(tmp_path / "b", Catalog.of((*CONTRACT_ASSETS, BASE_COIN)))
    schemas, contract_schemas = served["components"]["schemas"], contract["components"]["schemas"]

    ids = [a.id for a in CONTRACT_ASSETS]
    assert ids in everywhere(contract, "enum") and ids not in everywhere(served, "enum")
    assert [*ids, 8453] in everywhere(served, "enum")
    assert contract_schemas["Chain"]["enum"] == [
        "BITCOIN",
        "ETHEREUM",
        "BSC",
        "TRON",
        "POLYGON",
        "SOLANA",
    ]
    assert schemas["Chain"]["enum"] == [*contract_schemas["Chain"]["enum"], "BASECHAIN"]
    assert schemas["ConfigAsset"]["properties"]["chain"] == {"$ref": "#/components/schemas/Chain"}
    patterns = everywhere(served, "pattern")
    assert any("|8453)$" in p for p in patterns)  # the assetId digit strings
    # an amount's own pattern: the most places served
    for body, field in (("PlatformSendRequest", "amount"), ("QuoteRequest", "cryptoAmount")):
        assert everywhere(schemas[body]["properties"][field], "pattern") == [amount_pattern(21)]
        assert everywhere(contract_schemas[body]["properties"][field], "pattern") == [
            amount_pattern(18)
        ]
    # the per-asset decimals rules: BASE's places need none (the widest), 18 now needs one
    rules = schemas["PlatformSendRequest"]["allOf"]
    by_places = {r["then"]["properties"]["amount"]["pattern"]: r for r in rules}
    assert amount_pattern(18) in by_places and amount_pattern(21) not in by_places
    assert len(rules) == len(contract_schemas["PlatformSendRequest"]["allOf"]) + 1
