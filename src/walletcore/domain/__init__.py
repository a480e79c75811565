"""Domain types: assets, money, ids, times, trades, clients, wallets, audit, errors."""

from walletcore.domain.assets import (
    ASSET_IDS,
    ASSETS_BY_ID,
    CATALOG,
    DEFAULT_FIAT,
    PRICE_FIATS,
    SYMBOLS,
    Asset,
    AssetKind,
    Chain,
    FeePayer,
    Fiat,
    asset_by_id,
    native_asset,
    parse_asset_id,
    parse_fiat,
)
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.ids import is_id, new_id, parse_id
from walletcore.domain.money import format_amount, parse_amount, truncate
from walletcore.domain.times import format_datetime
from walletcore.domain.trade import (
    Accepted,
    Figures,
    Fill,
    FixedLeg,
    Order,
    OrderOutcome,
    Quote,
    Rejected,
    Side,
    Trade,
    TradeStatus,
    Unknown,
)
from walletcore.domain.wallet import TxRow, WalletOwner, WalletRecord

__all__ = [
    "ASSET_IDS", "ASSETS_BY_ID", "CATALOG", "DEFAULT_FIAT", "PRICE_FIATS", "SYMBOLS",
    "Accepted", "ApiClient", "Asset", "AssetKind", "AuditEntry", "Chain", "FeePayer", "Fiat",
    "Figures", "Fill", "FixedLeg", "Order", "OrderOutcome", "Quote", "Rejected", "Side",
    "Trade", "TradeStatus", "TxRow", "Unknown", "User", "WalletOwner", "WalletRecord",
    "asset_by_id", "format_amount", "format_datetime", "is_id", "native_asset", "new_id",
    "parse_amount", "parse_asset_id", "parse_fiat", "parse_id", "truncate",
]
