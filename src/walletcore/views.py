"""Wire shapes of the spec, as plain dicts: one place that names the fields.

The binding serialises these; embedders can too. Amounts are cut to 6 places here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.money import format_amount, format_optional
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.domain.trade import Trade
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
