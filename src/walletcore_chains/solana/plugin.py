"""The chain plugin `solana`: SOLANA (docs/chains.md).

- Addresses: base58 of a 32-byte public key, canonical encoding; the all-zero key (the
  system program) is refused.
- Keys: SLIP-0010 ed25519 on `m/44'/501'/0'/0'`; the address is the public key in base58.
  Signatures: ed25519 over the message itself (64 bytes).
- Gateways: `rpc` (`SolanaGateway` on a Solana JSON-RPC node) and `devnet` (in-process
  LiteSVM, sandbox profile only).
- Settings (`SolanaSettings`): `WALLETCORE_SOLANA_RPC_URL`, `WALLETCORE_SOLANA_NETWORK`,
  `WALLETCORE_SOLANA_USDT_MINT`, ...; the names before the plugins (`WALLETCORE_RPC_SOLANA`,
  `WALLETCORE_NETWORK`, `WALLETCORE_RPC_TIMEOUT_SECONDS`) are read too. The transfer
  lifecycle's (docs/solana.md): `WALLETCORE_SOLANA_COMMITMENT`,
  `WALLETCORE_SOLANA_CU_PRICE_MIN`, `WALLETCORE_SOLANA_CU_PRICE_MAX`,
  `WALLETCORE_SOLANA_STUCK_AFTER_SECONDS`.

Chain libraries are imported when used, not with this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, SecretStr

from walletcore.chainplugins import (
    ChainPlugin,
    GatewayContext,
    GatewayFactory,
    KeyDerivation,
    env_name,
)
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.curves import verify_ed25519
from walletcore_chains.settings import ChainSettings, network, node_url, rpc_timeout, stuck_after
from walletcore_chains.solana.chain import CHAIN, DESCRIPTION

PATH = "m/44'/501'/0'/0'"


class SolanaSettings(ChainSettings):
    """Settings of the `solana` plugin; each field's variable is `WALLETCORE_` + its name in
    capitals, and the older name after it is read too."""

    #: The Solana JSON-RPC endpoint of the `rpc` gateway (a secret, like the EVM ones).
    solana_rpc_url: SecretStr | None = node_url("SOLANA_RPC_URL", "RPC_SOLANA")
    #: `mainnet` (mainnet-beta) or `testnet` (Solana's devnet cluster).
    solana_network: str = network("SOLANA")
    solana_rpc_timeout_seconds: float = rpc_timeout("SOLANA")
    #: SPL mints beyond the built-in table: USDT has no canonical mint on Solana's devnet.
    solana_usdt_mint: str | None = None
    solana_usdc_mint: str | None = None
    #: When a landed transfer reads `success` (lookup, history, the transfer lifecycle):
    #: `finalized` (rooted: cannot be rolled back) or `confirmed` (voted on by a
    #: supermajority; seconds sooner).
    solana_commitment: Literal["finalized", "confirmed"] = "finalized"
    #: The compute-unit price of a transfer (micro-lamports per compute unit), from the
    #: recent prioritization fees: never below the minimum, never above the maximum.
    solana_cu_price_min: int = Field(default=0, ge=0)
    solana_cu_price_max: int = Field(default=1_000_000, ge=0, le=10**9)
    #: Seconds a broadcast transfer may stay pending before it counts as stuck.
    solana_stuck_after_seconds: float = stuck_after(60.0, most=3600)


def gateway_options(settings: SolanaSettings) -> dict[str, Any]:
    """`SolanaGateway`'s options from the settings."""
    if settings.solana_cu_price_min > settings.solana_cu_price_max:
        raise ConfigurationError(
            f"{env_name(SolanaSettings, 'solana_cu_price_min')} is above "
            f"{env_name(SolanaSettings, 'solana_cu_price_max')}"
        )
    return {
        "commitment": settings.solana_commitment,
        "cu_price_min": settings.solana_cu_price_min,
        "cu_price_max": settings.solana_cu_price_max,
        "stuck_after_seconds": settings.solana_stuck_after_seconds,
    }


# -- the chain's definition ---------------------------------------------------------------
def validate_address(chain: Chain, address: object) -> str:
    """The address unchanged, or `InvalidRequest` saying what is wrong. Surrounding
    whitespace is ignored."""
    from solders.pubkey import Pubkey

    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {Chain(chain)} address is required")
    text = address.strip()
    try:
        key = Pubkey.from_string(text) if 32 <= len(text) <= 44 else None
    except ValueError:  # not base58, or not 32 bytes
        key = None
    if key is None or str(key) != text:  # the canonical encoding only
        raise InvalidRequest("Invalid SOLANA address: expected a base58 32-byte public key")
    if key == Pubkey.default():
        raise InvalidRequest("Invalid SOLANA address: the system program cannot receive funds")
    return text


def address_of(public_key: bytes) -> str:
    """The base58 address of a 32-byte ed25519 public key."""
    from solders.pubkey import Pubkey

    return str(Pubkey(bytes(public_key)))


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    from solders.pubkey import Pubkey

    try:
        public = bytes(Pubkey.from_string(address))
    except ValueError:  # not base58, or not 32 bytes
        return False
    return verify_ed25519(public, payload, signature)


# -- gateways -----------------------------------------------------------------------------
def _mints(settings: SolanaSettings) -> dict[int, object]:
    from walletcore_chains.solana.config import solana_mints

    mints: dict[int, object] = dict(
        solana_mints(
            settings.solana_network,
            usdt=settings.solana_usdt_mint,
            usdc=settings.solana_usdc_mint,
        )
    )
    return mints


def _rpc_needs(chain: Chain, settings: SolanaSettings) -> Iterator[str]:
    if settings.solana_rpc_url is None:
        yield f"{env_name(SolanaSettings, 'solana_rpc_url')} is required by {chain}'s rpc gateway"
    try:
        _mints(settings)
    except ConfigurationError as exc:
        yield str(exc)
    try:
        gateway_options(settings)
    except ConfigurationError as exc:
        yield str(exc)


def _rpc(context: GatewayContext[SolanaSettings]) -> ChainGateway:
    from walletcore_chains.solana.config import solana_mints
    from walletcore_chains.solana.gateway import SolanaGateway
    from walletcore_chains.solana.rpc import RpcNode, rpc_client

    settings = context.settings
    if settings.solana_rpc_url is None:  # `_rpc_needs` said so first
        raise ConfigurationError(f"{env_name(SolanaSettings, 'solana_rpc_url')} is required")
    mints = solana_mints(
        settings.solana_network, usdt=settings.solana_usdt_mint, usdc=settings.solana_usdc_mint
    )
    client = rpc_client(
        settings.solana_rpc_url.get_secret_value(), settings.solana_rpc_timeout_seconds
    )
    options = gateway_options(settings)
    return SolanaGateway(
        RpcNode(client), context.validate_address, mints, chain=context.chain, **options
    )


def _devnet(context: GatewayContext[SolanaSettings]) -> ChainGateway:
    from walletcore_chains.solana.devnet import DevnetSolanaGateway

    return DevnetSolanaGateway(
        context.validate_address,
        context.catalog.assets_of(context.chain),
        **gateway_options(context.settings),
    )


#: Entry point `walletcore.chains: solana`.
PLUGIN: ChainPlugin[SolanaSettings] = ChainPlugin(
    name="solana",
    chains=frozenset({CHAIN}),
    settings_model=SolanaSettings,
    validate_address=validate_address,
    verify_signature=verify_signature,
    keys={CHAIN: KeyDerivation(PATH, "ed25519", address_of)},
    describes={CHAIN: DESCRIPTION},
    gateways={
        "rpc": GatewayFactory(_rpc, needs=_rpc_needs),
        "devnet": GatewayFactory(_devnet, sandbox_only=True),
    },
)

__all__ = [
    "PATH",
    "PLUGIN",
    "SolanaSettings",
    "address_of",
    "gateway_options",
    "validate_address",
    "verify_signature",
]
