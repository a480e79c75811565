"""Api clients (the integrating applications) and their end users."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from walletcore.domain.assets import CONTRACT_ASSETS, FeePayer

#: A client built without naming its assets (tests, fakes): the contract's sixteen. The
#: operator's clients are enabled for what `AuthService` is told, in catalog order.
_CONTRACT_IDS = tuple(a.id for a in CONTRACT_ASSETS)


@dataclass(frozen=True, slots=True)
class AuthFailures:
    """A client's failed `/auth` calls (a wrong key, or any key while disabled), kept in
    place: one record per client however many fail, so a flood grows no storage.

    A run is the failures since the client's last successful `/auth`: `count` of them, the
    first at `since`; a success ends the run (`count` 0, `since` None). `last_at` is the
    latest failure ever, kept after a success.
    """

    count: int = 0
    since: datetime | None = None
    last_at: datetime | None = None

    def added(self, later: AuthFailures) -> AuthFailures:
        """These and `later` failures (a tally of refusals after them): counted together;
        `since` theirs, or `later`'s when these are no run; the latest of the two."""
        last = self.last_at if later.last_at is None else later.last_at
        if self.last_at is not None and later.last_at is not None:
            last = max(self.last_at, later.last_at)
        return AuthFailures(
            self.count + later.count, self.since if self.count else later.since, last
        )

    def ended(self) -> AuthFailures:
        """After a successful `/auth`: no run; when the latest failure was stays known."""
        return AuthFailures(last_at=self.last_at)


@dataclass(frozen=True, slots=True)
class ApiClient:
    """An api client. The api key itself is never stored: only its SHA-256 (hex)."""

    client_id: str
    name: str
    key_hash: str = field(repr=False)
    enabled_assets: tuple[int, ...] = _CONTRACT_IDS
    fee_payer: FeePayer = FeePayer.USER
    #: Per-asset exceptions to `fee_payer`.
    asset_fee_payers: Mapping[int, FeePayer] = field(default_factory=dict)
    disabled: bool = False
    #: Bumped by every key rotation and by disabling: tokens of an older generation fail.
    key_generation: int = 1
    created_at: datetime | None = None
    #: Changed only by `/auth` (`ClientStore.add_auth_failures`, `.auth_succeeded`), never by
    #: the operator's changes of the client.
    auth_failures: AuthFailures = AuthFailures()

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
