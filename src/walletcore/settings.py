"""Settings, read from the environment with the prefix WALLETCORE_ (pydantic-settings)."""

from __future__ import annotations

import os
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from walletcore.domain.assets import Chain


class Profile(StrEnum):
    SANDBOX = "sandbox"
    PRODUCTION = "production"


#: Endpoints on which assets can be flagged unavailable (answered with 503).
FLAGGABLE_ENDPOINTS = (
    "sell",
    "order",
    "trade/approve",
    "balance",
    "info",
    "transactions",
    "txid",
    "fee",
    "send",
    "platform/balance",
    "platform/info",
    "platform/transactions",
    "platform/txid",
    "platform/fee",
    "platform/send",
)

#: The spec flags 42, 51 and 61 as unavailable "on some endpoints"; we default to the
#: platform wallet endpoints, whose 503 reads "asset not available on the endpoint".
DEFAULT_UNAVAILABLE: dict[str, list[int]] = {
    "platform/balance": [42, 51, 61],
    "platform/info": [42, 51, 61],
    "platform/transactions": [42, 51, 61],
    "platform/txid": [42, 51, 61],
    "platform/fee": [42, 51, 61],
    "platform/send": [42, 51, 61],
}


def _int_list(value: object) -> object:
    """Accept `1,2,21` as well as a JSON list from the environment."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        return [int(part) for part in text.split(",") if part.strip()]
    return value


def default_home() -> Path:
    """`$XDG_DATA_HOME/walletcore`, else `~/.local/share/walletcore` (the XDG base
    directory default; a relative XDG_DATA_HOME is ignored, as the specification says)."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "walletcore"


#: `WALLETCORE_CHAIN_<CHAIN>=<plugin>[:<mode>]`: one chain's gateway (`Settings.gateways`).
CHAIN_VARIABLE_PREFIX = "WALLETCORE_CHAIN_"


class _ChainVariables(PydanticBaseSettingsSource):
    """The `WALLETCORE_CHAIN_<CHAIN>` variables, gathered into `gateways`."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        size = len(CHAIN_VARIABLE_PREFIX)
        found = {
            name[size:].upper(): value
            for name, value in os.environ.items()
            if name.upper().startswith(CHAIN_VARIABLE_PREFIX) and len(name) > size
        }
        return {"gateways": found} if found else {}


def _is_chain_name(name: str) -> bool:
    try:
        Chain(name)
    except ValueError:
        return False
    return True


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    profile: Profile = Profile.SANDBOX
    #: Where the sandbox keeps its files (database, generated secrets, the sandbox
    #: ledger): `WALLETCORE_HOME`, else `default_home()`, the same folder from any working
    #: directory (a relative default made a command run elsewhere use another state).
    home: Path = Field(default_factory=default_home)
    database_url: SecretStr | None = None
    #: PostgreSQL connections each process keeps (the `sql` repo): at least the requests a
    #: worker serves at once, or units of work queue for one.
    db_pool_size: int = Field(default=32, ge=1, le=500)

    # adapters, by entry-point name
    #: The storage, on every profile and for every entry point (`walletcore serve`, the
    #: CLI, `create_container()`): `sql`, the SQLite file `home/walletcore.db` unless
    #: `WALLETCORE_DATABASE_URL` names another database (`walletcore[sql]`). `memory`
    #: (`walletcore.testing`, one process, lost on exit) is asked for by name: tests, and
    #: embedders of the core alone (docs/decisions.md, "One default storage").
    repo: str = "sql"
    prices: str = "sandbox"
    venue: str = "sandbox"
    keystore: str = "sealed"
    #: The mode of every chain's gateway (`sandbox`, `devnet`, `rpc`: docs/chains.md),
    #: served by the chain plugins of the entry-point group `walletcore.chains`.
    chains: str = "sandbox"
    #: One chain's gateway, over `chains`: chain -> `<plugin>[:<mode>]`, from the variables
    #: `WALLETCORE_CHAIN_<CHAIN>` (e.g. `WALLETCORE_CHAIN_SOLANA=devnet`,
    #: `WALLETCORE_CHAIN_ETHEREUM=myplugin:rpc`), or all at once as JSON in
    #: `WALLETCORE_GATEWAYS`.
    gateways: dict[Chain, str] = Field(default_factory=dict)

    quote_ttl_seconds: int = Field(default=60, ge=1, le=3600)
    #: How long a process trusts the api client it read to check a bearer token. Disabling
    #: or rotating a client stops its tokens at once in the process that did it, and
    #: within this many seconds in every other one (0: read the client on every request).
    client_cache_seconds: float = Field(default=1.0, ge=0, le=60)
    #: Seconds between two refreshes of the price source (`/prices`, quotes).
    price_refresh_seconds: float = Field(default=60.0, gt=0)
    #: Seconds a refresh may take before it counts as failed (the last values are kept);
    #: a quote waiting on a refresh this long answers `504`.
    price_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: Age after which a price is no longer quoted on: a quote answers `502` (no usable
    #: price) rather than quote an old price. `/prices` keeps showing it (last known).
    price_max_age_seconds: float = Field(default=900.0, gt=0)
    #: How far (percent) the price at approval may move against the quote's before the
    #: venue refuses the order (`502 Order rejected: ...`, the trade `failed`).
    max_slippage_percent: Decimal = Field(default=Decimal(2), ge=0, le=100)
    #: assetId -> the least crypto a quote may hold (`/sell`, `/order`, either leg fixed),
    #: in the asset (JSON, e.g. `{"2": "0.001"}`); assets left out keep
    #: `DEFAULT_TRADE_MINIMUMS` (walletcore.domain.trade_limits). No leg is ever under
    #: 0.000001, whatever is set here. Checked against the served assets where the
    #: container builds the limits (`Container.trade_limits`), as are the asset ids below.
    trade_minimums: dict[int, Decimal] = Field(default_factory=dict)
    #: assetId -> the most crypto a quote may hold, likewise (`DEFAULT_TRADE_MAXIMUMS`).
    trade_maximums: dict[int, Decimal] = Field(default_factory=dict)
    trades_page_size: int = Field(default=10, ge=1, le=100)
    #: Page size of `/transactions` and `/platform/transactions` (newest first).
    transactions_page_size: int = Field(default=10, ge=1, le=100)
    #: Seconds an EVM send waits for its address's nonce lease while another process holds
    #: it, before `503 Another send from this address is still in progress` (the repos'
    #: leases read it).
    nonce_wait_seconds: float = Field(default=180.0, gt=0, le=3600)

    #: Assets limited on this environment: absent from /config, `400 Unknown assetId`.
    limited_assets: Annotated[list[int], NoDecode] = Field(default_factory=list)
    #: endpoint (path without the leading slash) -> assets answered with 503 there.
    unavailable_assets: dict[str, list[int]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_UNAVAILABLE.items()}
    )

    #: Ed25519 seed (64 hex) that signs access tokens. Generated into `home` on the
    #: sandbox profile when absent; required in production.
    token_signing_key: SecretStr | None = None
    #: Operator secret that seals platform wallets (64 hex). Same rule as above.
    master_key: SecretStr | None = None
    #: How many wallet unseals (Argon2id, 64 MiB each) may run at once.
    max_concurrent_unseals: int = Field(default=4, ge=1, le=64)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _ChainVariables(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    @field_validator("gateways", mode="before")
    @classmethod
    def _chain_names(cls, value: object) -> object:
        """Each key has the form of a chain's name; whether an installed plugin defines
        the chain is told when the chains are planned (walletcore.chainplugins)."""
        if not isinstance(value, dict):
            return value
        bad = sorted(str(k) for k in value if not _is_chain_name(str(k).strip().upper()))
        if bad:
            raise ValueError(
                f"{', '.join(CHAIN_VARIABLE_PREFIX + b.upper() for b in bad)} names no "
                "chain (a chain's name is 2 to 24 letters and digits, starting with a letter)"
            )
        return {str(k).strip().upper(): str(v).strip() for k, v in value.items()}

    @field_validator("limited_assets", mode="before")
    @classmethod
    def _parse_limited(cls, value: object) -> object:
        return _int_list(value)

    @field_validator("unavailable_assets")
    @classmethod
    def _known_endpoints(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        cleaned = {k.strip("/"): v for k, v in value.items()}
        unknown = sorted(set(cleaned) - set(FLAGGABLE_ENDPOINTS))
        if unknown:
            raise ValueError(f"unknown endpoints: {unknown}; known: {list(FLAGGABLE_ENDPOINTS)}")
        return cleaned

    def is_unavailable(self, endpoint: str, asset_id: int) -> bool:
        return asset_id in self.unavailable_assets.get(endpoint, ())
