"""Settings of the `tron` plugin and its `rpc` gateway factory (docs/tron.md).

Every variable is `WALLETCORE_TRON_...`; the node URL, the history URL and the API key are
secrets: never logged, never in a repr or an error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from walletcore.chainplugins import GatewayContext, GatewayFactory, env_name
from walletcore.domain.assets import CONTRACT_ASSETS, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.settings import ChainSettings, node_url, rpc_timeout, stuck_after

#: The assets the TRON plugin declares (the contract's, of TRON).
_DECLARED = {a.id: a for a in CONTRACT_ASSETS if a.chain == Chain.TRON}

#: TRC20 contracts per network (asset id -> address). Nile and Shasta have no canonical
#: USDT or USDC: a test deployment names its own with `WALLETCORE_TRON_TOKENS`.
TOKENS: dict[str, dict[int, str]] = {
    "mainnet": {
        41: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",  # Tether USD (USDT)
        42: "TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8",  # USD Coin (USDC)
    },
    "nile": {},
    "shasta": {},
}


class TronSettings(ChainSettings):
    """Settings of the `tron` plugin (`WALLETCORE_` + the field's name in capitals)."""

    #: the full node's HTTP API base, e.g. `https://api.trongrid.io` (a secret)
    tron_node_url: SecretStr | None = node_url("TRON_NODE_URL", "RPC_TRON")
    #: sent as the `TRON-PRO-API-KEY` header on every request (TronGrid's; a secret)
    tron_api_key: SecretStr | None = None
    #: TronGrid's `/v1` history API base, when not the node's (a self-hosted java-tron has
    #: none: point this at TronGrid or another indexer serving it; a secret)
    tron_history_url: SecretStr | None = node_url()
    #: the token table: mainnet, nile or shasta (addresses are `T...` on all of them)
    tron_network: Literal["mainnet", "nile", "shasta"] = "mainnet"
    #: TRC20 contracts over the table: asset id -> `T...` address, JSON (`{"41": "T..."}`)
    tron_tokens: dict[int, str] = Field(default_factory=dict)
    tron_rpc_timeout_seconds: float = rpc_timeout("TRON")
    #: a TRC20 transfer's fee_limit is the node's energy estimate x (1 + this), priced
    tron_energy_margin: float = Field(default=0.2, ge=0, le=5)
    #: seconds a signed transaction stays valid after its reference block (java-tron takes
    #: at most 24 h); a retry with the same X-Request-Id re-sends it within that window
    tron_expiration_seconds: int = Field(default=300, ge=30, le=86_400)
    #: seconds a PLATFORM top-up may take to reach a block before the transfer goes
    tron_receipt_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    #: seconds a broadcast transfer may stay pending before the follow job counts it stuck
    #: (TRON replaces nothing: it is re-signed only once it EXPIRED)
    tron_stuck_after_seconds: float = stuck_after(60.0, most=86_400)

    @field_validator("tron_tokens")
    @classmethod
    def _token_ids(cls, value: dict[int, str]) -> dict[int, str]:
        for asset_id in value:
            asset = _DECLARED.get(asset_id)
            if asset is None or asset.chain != Chain.TRON or asset.is_native:
                raise ValueError(f"asset {asset_id} is not a TRC20 token of TRON (41, 42)")
        return {asset_id: address.strip() for asset_id, address in value.items()}

    def tokens(self) -> dict[int, str]:
        return {**TOKENS[self.tron_network], **self.tron_tokens}


def _rpc_needs(chain: Chain, settings: TronSettings) -> Iterator[str]:
    from walletcore_chains.tron import validate_address

    if settings.tron_node_url is None:
        yield f"{env_name(TronSettings, 'tron_node_url')} is required by {chain}'s rpc gateway"
    for asset_id, address in settings.tron_tokens.items():
        try:
            validate_address(Chain.TRON, address)
        except InvalidRequest:
            yield (
                f"{env_name(TronSettings, 'tron_tokens')}: the contract of asset {asset_id} is "
                "not a TRON address (T..., base58check)"
            )


def _rpc(context: GatewayContext[TronSettings]) -> ChainGateway:
    from walletcore_chains.tron.client import TronClient
    from walletcore_chains.tron.gateway import TronGateway, TronOptions

    settings = context.settings
    if settings.tron_node_url is None:  # `_rpc_needs` said so first
        raise ConfigurationError(f"{env_name(TronSettings, 'tron_node_url')} is required")
    history = settings.tron_history_url
    client = TronClient(
        settings.tron_node_url.get_secret_value(),
        api_key=settings.tron_api_key.get_secret_value() if settings.tron_api_key else None,
        history_url=history.get_secret_value() if history else None,
        timeout=settings.tron_rpc_timeout_seconds,
    )
    options = TronOptions(
        network=settings.tron_network,
        energy_margin=settings.tron_energy_margin,
        expiration_seconds=settings.tron_expiration_seconds,
        receipt_timeout=settings.tron_receipt_timeout_seconds,
        stuck_after_seconds=settings.tron_stuck_after_seconds,
    )
    return TronGateway(
        client,
        context.validate_address,
        tokens=settings.tokens(),
        options=options,
        chain=context.chain,
    )


rpc_gateway: GatewayFactory[TronSettings] = GatewayFactory(_rpc, needs=_rpc_needs)

__all__ = ["TOKENS", "TronSettings", "rpc_gateway"]
