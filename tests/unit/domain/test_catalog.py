"""The open `Chain` and the `Catalog` (walletcore.domain.catalog): the form of a chain's
name, its equality with the plain string, the contract's constants; the catalog's order,
lookups and refusals, and the container's catalog."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest
from pydantic import BaseModel

from walletcore.container import create_container
from walletcore.domain.assets import (
    CONTRACT_ASSETS,
    CONTRACT_CHAINS,
    Asset,
    AssetKind,
    Chain,
)
from walletcore.domain.catalog import Catalog, chain_order
from walletcore.domain.errors import UnknownAsset
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG

BASE = Chain("BASECHAIN")
BASE_ETH = Asset(8453, BASE, "ETH", AssetKind.NATIVE, None, 18)
BASE_USDC = Asset(84531, BASE, "USDC", AssetKind.TOKEN, "ERC20", 6)
ZORA = Chain("ZORA")
ZORA_ETH = Asset(7777777, ZORA, "ZETH", AssetKind.NATIVE, None, 18)


# -- Chain ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["BITCOIN", "BASECHAIN", "L2", "A1", "X" * 24, "OP2CHAIN"])
def test_a_chain_name_of_the_form_is_a_chain(name: str) -> None:
    chain = Chain(name)
    assert isinstance(chain, Chain) and isinstance(chain, str)
    assert chain == name and chain.value == name and str(chain) == name
    assert type(chain.value) is str and f"{chain}" == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "B",
        "bitcoin",
        "Bitcoin",
        "1INCH",
        "BASE-CHAIN",
        "BASE_CHAIN",
        " TRON",
        "TRON ",
        "X" * 25,
        "ÉTHER",
        "TRON\n",
        None,
        1,
        b"TRON",
    ],
    ids=repr,
)
def test_anything_else_is_a_value_error(name: object) -> None:
    with pytest.raises(ValueError, match="is not a chain name"):
        Chain(name)


def test_a_chain_equals_and_hashes_as_its_name() -> None:
    made = Chain("ETHEREUM")  # a new object, equal to the constant
    assert made == Chain.ETHEREUM and made == "ETHEREUM" and "ETHEREUM" == made
    assert made is not Chain.ETHEREUM  # another object: `is` would say another chain
    assert hash(made) == hash("ETHEREUM") == hash(Chain.ETHEREUM)
    assert {Chain.TRON: 1}["TRON"] == 1 and {"TRON": 1}[Chain.TRON] == 1
    assert made != Chain.BSC and made != "ethereum"
    assert Chain(Chain.SOLANA) is Chain.SOLANA  # a Chain is itself


def test_the_contract_chains_are_constants_in_contract_order() -> None:
    assert CONTRACT_CHAINS == (
        Chain.BITCOIN,
        Chain.ETHEREUM,
        Chain.BSC,
        Chain.TRON,
        Chain.POLYGON,
        Chain.SOLANA,
    )
    assert [c.value for c in CONTRACT_CHAINS] == [
        "BITCOIN",
        "ETHEREUM",
        "BSC",
        "TRON",
        "POLYGON",
        "SOLANA",
    ]
    assert all(type(c) is Chain for c in CONTRACT_CHAINS)
    assert not hasattr(Chain, "__members__")


def test_a_chain_survives_pickle_copy_json_and_pydantic() -> None:
    for chain in (Chain.TRON, BASE):
        again = pickle.loads(pickle.dumps(chain))
        assert again == chain and type(again) is Chain
        assert copy.deepcopy(chain) == chain and type(copy.copy(chain)) is Chain
    assert json.dumps({Chain.TRON: Chain.BSC}) == '{"TRON": "BSC"}'
    assert repr(Chain.TRON) == "Chain('TRON')"

    class Model(BaseModel):
        chain: Chain
        caps: dict[Chain, int]

    model = Model.model_validate({"chain": "BASECHAIN", "caps": {"TRON": 1}})
    assert type(model.chain) is Chain and all(type(k) is Chain for k in model.caps)
    assert model.model_dump_json() == '{"chain":"BASECHAIN","caps":{"TRON":1}}'
    with pytest.raises(ValueError, match="is not a chain name"):
        Model.model_validate({"chain": "tron", "caps": {}})


# -- Catalog ----------------------------------------------------------------------------------
def test_the_contract_catalog_is_the_sixteen_in_contract_order() -> None:
    catalog = Catalog.of(CONTRACT_ASSETS)
    assert catalog == CONTRACT_CATALOG and len(catalog) == 16
    assert catalog.assets == CONTRACT_ASSETS
    assert catalog.chains == CONTRACT_CHAINS
    assert catalog.asset_ids == (1, 2, 21, 22, 3, 31, 32, 4, 41, 42, 5, 51, 52, 6, 61, 62)
    assert catalog.symbols == ("BNB", "BTC", "ETH", "POL", "SOL", "TRX", "USDC", "USDT")
    assert catalog.max_decimals == 18
    assert [catalog.native_asset(c).symbol for c in CONTRACT_CHAINS] == [
        "BTC",
        "ETH",
        "BNB",
        "TRX",
        "POL",
        "SOL",
    ]


def test_other_chains_follow_the_contract_by_name_whatever_the_order_given() -> None:
    given = [(ZORA, [ZORA_ETH]), (BASE, [BASE_ETH, BASE_USDC])]
    reversed_contract = [
        (c, [a for a in CONTRACT_ASSETS if a.chain == c]) for c in reversed(CONTRACT_CHAINS)
    ]
    catalog = Catalog([*given, *reversed_contract])
    assert catalog.chains == (*CONTRACT_CHAINS, BASE, ZORA)
    assert catalog.assets == (*CONTRACT_ASSETS, BASE_ETH, BASE_USDC, ZORA_ETH)
    assert catalog.asset_ids[-3:] == (8453, 84531, 7777777)
    assert catalog.symbols == ("BNB", "BTC", "ETH", "POL", "SOL", "TRX", "USDC", "USDT", "ZETH")
    assert sorted([ZORA, Chain.SOLANA, BASE, Chain.BITCOIN], key=chain_order) == [
        Chain.BITCOIN,
        Chain.SOLANA,
        BASE,
        ZORA,
    ]


def test_lookups_resolve_an_added_asset_as_the_contract_ones() -> None:
    catalog = Catalog.of((*CONTRACT_ASSETS, BASE_USDC, BASE_ETH))
    assert catalog.asset_by_id(8453) is BASE_ETH and catalog.asset_by_id(2).symbol == "ETH"
    assert catalog.get(84531) is BASE_USDC and catalog.get(99) is None
    assert 84531 in catalog and 99 not in catalog and "1" not in catalog
    assert catalog.native_asset(BASE) is BASE_ETH
    assert catalog.native_asset(Chain("BASECHAIN")) is BASE_ETH  # any object of the name
    assert catalog.has_chain(BASE) and not catalog.has_chain(ZORA)
    assert catalog.assets_of(BASE) == (BASE_USDC, BASE_ETH)  # the plugin's order kept
    assert catalog.assets_of(ZORA) == ()


@pytest.mark.parametrize("asset_id", [0, 7, 23, 8453, -1])
def test_an_id_not_served_is_unknown_asset(asset_id: int) -> None:
    with pytest.raises(UnknownAsset) as raised:
        CONTRACT_CATALOG.asset_by_id(asset_id)
    assert (raised.value.status, raised.value.message) == (400, "Unknown assetId")
    with pytest.raises(KeyError):
        CONTRACT_CATALOG.native_asset(BASE)


def test_for_chains_keeps_the_order_and_only_the_chains_served() -> None:
    catalog = Catalog.of((*CONTRACT_ASSETS, BASE_ETH))
    subset = catalog.for_chains({BASE, Chain.TRON, Chain.BITCOIN, ZORA})
    assert subset.chains == (Chain.BITCOIN, Chain.TRON, BASE)
    assert subset.asset_ids == (1, 4, 41, 42, 8453)
    assert subset.symbols == ("BTC", "ETH", "TRX", "USDC", "USDT")
    assert subset.max_decimals == 18 and catalog.for_chains(CONTRACT_CHAINS) == CONTRACT_CATALOG
    assert Catalog({}).assets == () and Catalog({}).max_decimals == 0


def test_duplicate_ids_are_refused() -> None:
    twin = Asset(2, BASE, "ETH", AssetKind.NATIVE, None, 18)
    with pytest.raises(ValueError, match="two assets have the id 2"):
        Catalog.of((*CONTRACT_ASSETS, twin))


@pytest.mark.parametrize(
    ("assets", "count"),
    [([BASE_USDC], 0), ([BASE_ETH, BASE_USDC, Asset(9, BASE, "X", AssetKind.NATIVE, None, 9)], 2)],
)
def test_a_chain_needs_exactly_one_native_asset(assets: list[Asset], count: int) -> None:
    with pytest.raises(ValueError, match=f"BASECHAIN needs exactly one native asset, not {count}"):
        Catalog({BASE: assets})


def test_an_asset_filed_under_another_chain_is_refused() -> None:
    with pytest.raises(ValueError, match=r"asset 8453 \(ETH\) is on BASECHAIN, not ZORA"):
        Catalog({ZORA: [ZORA_ETH, BASE_ETH]})
    with pytest.raises(ValueError, match="names the chain TRON twice"):
        Catalog([(Chain.TRON, []), ("TRON", [])])


def test_the_container_serves_the_contract_catalog_of_the_planned_chains(tmp_path: Path) -> None:
    container = create_container(Settings(home=tmp_path, repo="memory"))
    catalog = container.catalog()
    assert catalog == CONTRACT_CATALOG
    assert catalog is container.catalog()  # one per container
    assert container.asset_policy().catalog is catalog
