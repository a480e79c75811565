"""Domain types: assets, money, ids, times, trades, clients, wallets, audit, errors."""

from walletcore.domain.assets import (
    CONTRACT_ASSETS,
    CONTRACT_CHAINS,
    DEFAULT_FIAT,
    PRICE_FIATS,
    Asset,
    AssetKind,
    Chain,
    FeePayer,
    Fiat,
    parse_asset_id,
    parse_fiat,
)
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
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
    "CONTRACT_ASSETS",
    "CONTRACT_CHAINS",
    "DEFAULT_FIAT",
    "PRICE_FIATS",
    "Accepted",
    "ApiClient",
    "Asset",
    "AssetKind",
    "AuditEntry",
    "Catalog",
    "Chain",
    "FeePayer",
    "Fiat",
    "Figures",
    "Fill",
    "FixedLeg",
    "Order",
    "OrderOutcome",
    "Quote",
    "Rejected",
    "Side",
    "Trade",
    "TradeStatus",
    "TxRow",
    "Unknown",
    "User",
    "WalletOwner",
    "WalletRecord",
    "format_amount",
    "format_datetime",
    "is_id",
    "new_id",
    "parse_amount",
    "parse_asset_id",
    "parse_fiat",
    "parse_id",
    "truncate",
]
