"""Wire shapes of the spec, as plain dicts: one place that names the fields.

The binding serialises these; embedders can too. Amounts are cut to 6 places here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from walletcore.domain.assets import Asset, Chain, native_asset
from walletcore.domain.money import format_amount, format_balance, format_optional
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.domain.trade import Trade
from walletcore.domain.wallet import TxRow
from walletcore.ports import FeeQuote
from walletcore.services.market import ClientConfig, ConfigAsset


def trade_view(trade: Trade) -> dict[str, Any]:
    figures = trade.figures
    view: dict[str, Any] = {
        "tradeId": trade.trade_id,
        "side": trade.side.value,
        "status": trade.status.value,
        "assetId": trade.asset_id,
        "symbol": trade.symbol,
        "fiat": trade.fiat.value,
        "cryptoAmount": format_optional(figures.crypto_amount),
        "fiatAmount": format_optional(figures.fiat_amount),
        "price": format_amount(figures.price),
        "quote": {
            "cryptoAmount": format_optional(trade.quote.crypto_amount),
            "fiatAmount": format_optional(trade.quote.fiat_amount),
            "price": format_amount(trade.quote.price),
            "expiresAt": format_datetime(trade.quote.expires_at),
        },
        "createdAt": format_datetime(trade.created_at),
        "approvedAt": format_optional_datetime(trade.approved_at),
        "completedAt": format_optional_datetime(trade.completed_at),
    }
    if trade.reference is not None:
        view["reference"] = trade.reference
    if trade.failure_reason is not None:
        view["failureReason"] = trade.failure_reason
    return view


def config_asset_view(item: ConfigAsset) -> dict[str, Any]:
    asset: Asset = item.asset
    view: dict[str, Any] = {
        "assetId": asset.id,
        "chain": asset.chain.value,
        "symbol": asset.symbol,
        "kind": asset.kind.value,
        "decimals": asset.decimals,
        "feePayer": item.fee_payer.value,
    }
    if asset.standard is not None:
        view["standard"] = asset.standard
    return view


def config_view(config: ClientConfig) -> dict[str, Any]:
    return {
        "feePayer": config.fee_payer.value,
        "assets": [config_asset_view(a) for a in config.assets],
    }


def addresses_view(addresses: Mapping[Chain, str]) -> dict[str, str]:
    return {chain.value: address for chain, address in addresses.items()}


# -- wallet operations ---------------------------------------------------------------------
# Chain amounts keep full precision (the 6-place cut is for trades): balances and amounts
# in the asset, fees in the chain's native coin.


def tx_row_view(row: TxRow, asset: Asset) -> dict[str, Any]:
    """The spec's Transaction row."""
    return {
        "hash": row.hash,
        "type": row.type,
        "amount": None
        if row.amount_units is None
        else format_balance(row.amount_units, asset.decimals),
        "fee": format_balance(row.fee_units, native_asset(asset.chain).decimals),
        "status": row.status,
        "date": format_optional_datetime(row.date),
    }


def fee_view(quote: FeeQuote, asset: Asset) -> str | dict[str, int]:
    """A decimal string in the native coin; on TRON the Tron fee object."""
    if asset.chain is Chain.TRON:
        fee: dict[str, int] = {"bandwidth": quote.bandwidth or 0}
        if not asset.is_native:
            fee["energy"] = quote.energy or 0
        return fee
    return format_balance(quote.native_units, native_asset(asset.chain).decimals)


def balance_view(units: int, asset: Asset) -> str:
    return format_balance(units, asset.decimals)
