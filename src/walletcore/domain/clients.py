"""Api clients (the integrating applications) and their end users."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from walletcore.domain.assets import ASSET_IDS, FeePayer


@dataclass(frozen=True, slots=True)
class ApiClient:
    """An api client. The api key itself is never stored: only its SHA-256 (hex)."""

    client_id: str
    name: str
    key_hash: str = field(repr=False)
    enabled_assets: tuple[int, ...] = ASSET_IDS
    fee_payer: FeePayer = FeePayer.USER
    #: Per-asset exceptions to `fee_payer`.
    asset_fee_payers: Mapping[int, FeePayer] = field(default_factory=dict)
    disabled: bool = False
    #: Bumped by every key rotation and by disabling: tokens of an older generation fail.
    key_generation: int = 1
    created_at: datetime | None = None

    def fee_payer_for(self, asset_id: int) -> FeePayer:
        return self.asset_fee_payers.get(asset_id, self.fee_payer)

    def is_enabled(self, asset_id: int) -> bool:
        return asset_id in self.enabled_assets


@dataclass(frozen=True, slots=True)
class User:
    """An end user of an api client; users of one client are invisible to another."""

    user_id: str
    client_id: str
    created_at: datetime
