"""Settings, read from the environment with the prefix WALLETCORE_ (pydantic-settings)."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from walletcore.domain.assets import ASSETS_BY_ID


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


#: Token standards of the EVM chains' contracts (`WALLETCORE_EVM_TOKENS`).
_EVM_TOKEN_STANDARDS = frozenset({"ERC20", "BEP20"})
_EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def _int_list(value: object) -> object:
    """Accept `1,2,21` as well as a JSON list from the environment."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        return [int(part) for part in text.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    profile: Profile = Profile.SANDBOX
    #: Where the sandbox keeps its files (database, generated secrets).
    home: Path = Path(".walletcore")
    database_url: SecretStr | None = None

    # adapters, by entry-point name
    repo: str = "memory"
    prices: str = "sandbox"
    venue: str = "sandbox"
    keystore: str = "sealed"
    chains: str = "sandbox"

    quote_ttl_seconds: int = Field(default=60, ge=1, le=3600)
    price_refresh_seconds: float = Field(default=60.0, gt=0)
    trades_page_size: int = Field(default=10, ge=1, le=100)
    #: Page size of `/transactions` and `/platform/transactions` (newest first).
    transactions_page_size: int = Field(default=10, ge=1, le=100)
    #: Network of the `rpc` chain gateways: `mainnet` or `testnet` (docs/chains.md).
    network: str = "mainnet"
    #: JSON-RPC endpoints of the `rpc` chain gateways (`WALLETCORE_RPC_ETHEREUM`, ...).
    rpc_ethereum: SecretStr | None = None
    rpc_bsc: SecretStr | None = None
    rpc_polygon: SecretStr | None = None
    rpc_solana: SecretStr | None = None
    #: SPL mints of the `rpc` Solana gateway beyond the built-in table (docs/chains.md):
    #: USDT has no canonical mint on Solana's devnet (`WALLETCORE_NETWORK=testnet`).
    solana_usdt_mint: str | None = None
    solana_usdc_mint: str | None = None
    #: Token contracts of the `rpc` EVM gateways over the built-in table (docs/chains.md):
    #: asset id -> checksummed 0x address, JSON (`{"21": "0x..."}`). Sepolia has no
    #: canonical USDT, BSC's testnet no USDT or USDC. The EIP-55 checksum is checked when
    #: the gateways are built (the core has no keccak).
    evm_tokens: dict[int, str] = Field(default_factory=dict)
    #: Seconds an RPC call may take before it counts as failed (a broadcast: outcome unknown).
    rpc_timeout_seconds: float = Field(default=20.0, gt=0, le=600)
    #: Seconds a sponsored EVM transfer waits for its gas top-up to be mined.
    evm_receipt_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    #: Blocks the node-read EVM history looks back (docs/chains.md; an indexer sees more).
    evm_history_blocks: int = Field(default=2_000, ge=1, le=1_000_000)
    #: Seconds an EVM send waits for its address's nonce lease while another process holds
    #: it, before `503 Another send from this address is still in progress`.
    nonce_wait_seconds: float = Field(default=180.0, gt=0, le=3600)
    #: Sandbox chains: seconds from broadcast until a transaction reads `success`.
    sandbox_confirm_seconds: float = Field(default=3.0, ge=0, le=3600)

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

    @field_validator("limited_assets", mode="before")
    @classmethod
    def _parse_limited(cls, value: object) -> object:
        return _int_list(value)

    @field_validator("limited_assets")
    @classmethod
    def _known_assets(cls, value: list[int]) -> list[int]:
        unknown = [a for a in value if a not in ASSETS_BY_ID]
        if unknown:
            raise ValueError(f"unknown asset ids: {unknown}")
        return value

    @field_validator("evm_tokens")
    @classmethod
    def _evm_token_contracts(cls, value: dict[int, str]) -> dict[int, str]:
        for asset_id, address in value.items():
            asset = ASSETS_BY_ID.get(asset_id)
            if asset is None or asset.standard not in _EVM_TOKEN_STANDARDS:
                raise ValueError(
                    f"asset {asset_id} is not a token of ETHEREUM, BSC or POLYGON "
                    "(the asset table's ERC20 and BEP20 ids)"
                )
            if not _EVM_ADDRESS.fullmatch(address.strip()):
                raise ValueError(f"the contract of asset {asset_id} is not a 0x address")
        return {asset_id: address.strip() for asset_id, address in value.items()}

    @field_validator("unavailable_assets")
    @classmethod
    def _known_endpoints(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        cleaned = {k.strip("/"): v for k, v in value.items()}
        unknown = sorted(set(cleaned) - set(FLAGGABLE_ENDPOINTS))
        if unknown:
            raise ValueError(f"unknown endpoints: {unknown}; known: {list(FLAGGABLE_ENDPOINTS)}")
        bad_ids = sorted({a for ids in cleaned.values() for a in ids} - set(ASSETS_BY_ID))
        if bad_ids:
            raise ValueError(f"unknown asset ids: {bad_ids}")
        return cleaned

    def is_unavailable(self, endpoint: str, asset_id: int) -> bool:
        return asset_id in self.unavailable_assets.get(endpoint, ())
