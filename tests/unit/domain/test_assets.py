"""The contract's assets, assetId parsing and fiats, against the spec's tables (the
`Catalog` and the open `Chain`: test_catalog.py)."""

from __future__ import annotations

import pytest

from walletcore.domain.assets import (
    CONTRACT_CHAINS,
    DEFAULT_FIAT,
    PRICE_FIATS,
    Fiat,
    parse_asset_id,
    parse_fiat,
)
from walletcore.domain.errors import InvalidRequest, UnknownAsset
from walletcore.testing import CONTRACT_CATALOG

#: The spec's asset table, row by row: assetId, chain, symbol, kind / standard, decimals.
SPEC_TABLE = """
1  | BITCOIN  | BTC  | native | 8
2  | ETHEREUM | ETH  | native | 18
21 | ETHEREUM | USDT | ERC20  | 6
22 | ETHEREUM | USDC | ERC20  | 6
3  | BSC      | BNB  | native | 18
31 | BSC      | USDT | BEP20  | 18
32 | BSC      | USDC | BEP20  | 18
4  | TRON     | TRX  | native | 6
41 | TRON     | USDT | TRC20  | 6
42 | TRON     | USDC | TRC20  | 6
5  | POLYGON  | POL  | native | 18
51 | POLYGON  | USDT | ERC20  | 6
52 | POLYGON  | USDC | ERC20  | 6
6  | SOLANA   | SOL  | native | 9
61 | SOLANA   | USDT | SPL    | 6
62 | SOLANA   | USDC | SPL    | 6
"""


def _spec_rows() -> list[tuple[int, str, str, str, str | None, int]]:
    rows = []
    for line in SPEC_TABLE.strip().splitlines():
        asset_id, chain, symbol, kind, decimals = (c.strip() for c in line.split("|"))
        native = kind == "native"
        rows.append(
            (
                int(asset_id),
                chain,
                symbol,
                "NATIVE" if native else "TOKEN",
                None if native else kind,
                int(decimals),
            )
        )
    return rows


def test_catalog_is_exactly_the_spec_table_in_its_order() -> None:
    ours = [
        (a.id, a.chain.value, a.symbol, a.kind.value, a.standard, a.decimals)
        for a in CONTRACT_CATALOG.assets
    ]
    assert ours == _spec_rows()
    assert len(CONTRACT_CATALOG.assets) == 16


def test_every_chain_has_exactly_one_native_coin() -> None:
    assert {c.value for c in CONTRACT_CHAINS} == {
        "BITCOIN",
        "ETHEREUM",
        "BSC",
        "TRON",
        "POLYGON",
        "SOLANA",
    }
    for chain in CONTRACT_CHAINS:
        natives = [a for a in CONTRACT_CATALOG.assets if a.chain == chain and a.is_native]
        assert natives == [CONTRACT_CATALOG.native_asset(chain)]


def test_price_map_symbols_are_the_spec_list() -> None:
    assert CONTRACT_CATALOG.symbols == ("BNB", "BTC", "ETH", "POL", "SOL", "TRX", "USDC", "USDT")


@pytest.mark.parametrize("row", _spec_rows(), ids=lambda r: str(r[0]))
def test_asset_by_id_finds_every_row(row: tuple[int, str, str, str, str | None, int]) -> None:
    asset = CONTRACT_CATALOG.asset_by_id(row[0])
    assert (asset.id, asset.chain.value, asset.symbol) == row[:3]


@pytest.mark.parametrize("asset_id", [0, 7, 20, 23, 63, 100, -1, 10**12])
def test_an_id_outside_the_catalog_is_unknown(asset_id: int) -> None:
    with pytest.raises(UnknownAsset) as raised:
        CONTRACT_CATALOG.asset_by_id(asset_id)
    assert (raised.value.status, raised.value.message) == (400, "Unknown assetId")


@pytest.mark.parametrize(
    ("raw", "expected"), [(21, 21), ("21", 21), ("1", 1), (1, 1), ("62", 62), ("021", 21)]
)
def test_parse_asset_id_accepts_ints_and_all_digit_strings(raw: object, expected: int) -> None:
    assert parse_asset_id(raw) == expected
    assert type(parse_asset_id(raw)) is int


@pytest.mark.parametrize(
    "raw",
    [
        "2.0",
        " 21",
        "21 ",
        "-1",
        "+1",
        "",
        "0x15",
        "2e1",
        "٢١",
        "21\n",
        "1_0",
        True,
        False,
        None,
        1.5,
        21.0,
        [21],
        {"id": 21},
        b"21",
        "9" * 40,
    ],
    ids=repr,
)
def test_parse_asset_id_rejects_everything_else_with_400(raw: object) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_asset_id(raw)
    assert raised.value.status == 400
    assert "assetId" in raised.value.message


def test_fiats_are_the_ten_of_the_spec_and_prices_cover_four() -> None:
    assert [f.value for f in Fiat] == [
        "USD",
        "EUR",
        "GBP",
        "CAD",
        "AUD",
        "SEK",
        "DKK",
        "PLN",
        "BRL",
        "AED",
    ]
    assert [f.value for f in PRICE_FIATS] == ["USD", "EUR", "GBP", "CAD"]
    assert DEFAULT_FIAT is Fiat.USD


def test_parse_fiat_defaults_to_usd_and_rejects_the_unknown() -> None:
    assert parse_fiat(None) is Fiat.USD
    assert parse_fiat("EUR") is Fiat.EUR
    for bad in ("usd", "XYZ", "", 1, " USD"):
        with pytest.raises(InvalidRequest) as raised:
            parse_fiat(bad)
        assert raised.value.status == 400 and "fiat" in raised.value.message
