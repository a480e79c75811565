"""What the chain plugins' settings models have in common (docs/chains.md, "Settings").

`ChainSettings` is their base: every field's variable is `WALLETCORE_` + its name in
capitals (or the names its `validation_alias` lists, preferred first: `env_aliases`),
other variables are ignored, and a model may be built by field name in code.

The fields every chain has are made here, once, each under its chain's own name (a field's
name is its variable, and a deployment's variables never change):

- `node_url`: the node's URL (a secret: it often carries an API key or a password).
- `rpc_timeout`: seconds a call to the node may take (a broadcast slower than that has an
  unknown outcome), read from `WALLETCORE_RPC_TIMEOUT_SECONDS` too.
- `network`: the chain's network, read from `WALLETCORE_NETWORK` too (not for BITCOIN,
  whose addresses would move with it: docs/bitcoin.md).
- `stuck_after`: seconds a broadcast transfer may stay pending before the transfer
  follower counts it stuck.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import env_aliases


class ChainSettings(BaseSettings):
    """The base of a chain plugin's settings model."""

    model_config = SettingsConfigDict(
        env_prefix="WALLETCORE_", extra="ignore", populate_by_name=True
    )


def node_url(*names: str) -> Any:
    """A node URL field (`SecretStr | None`, unset by default) read from `WALLETCORE_` +
    each of `names`, preferred first; no names: from the field's own variable."""
    if not names:
        return Field(default=None)
    return Field(default=None, validation_alias=env_aliases(*names))


def rpc_timeout(prefix: str) -> Any:
    """`WALLETCORE_<prefix>_RPC_TIMEOUT_SECONDS` (or `WALLETCORE_RPC_TIMEOUT_SECONDS`):
    above 0, at most 600, 20 by default."""
    return Field(
        default=20.0,
        gt=0,
        le=600,
        validation_alias=env_aliases(f"{prefix}_RPC_TIMEOUT_SECONDS", "RPC_TIMEOUT_SECONDS"),
    )


def network(prefix: str, default: str = "mainnet") -> Any:
    """`WALLETCORE_<prefix>_NETWORK` (or `WALLETCORE_NETWORK`)."""
    return Field(default=default, validation_alias=env_aliases(f"{prefix}_NETWORK", "NETWORK"))


def stuck_after(default: float | None, *, most: float) -> Any:
    """Seconds pending before a broadcast counts as stuck: above 0, at most `most`."""
    return Field(default=default, gt=0, le=most)


__all__ = ["ChainSettings", "network", "node_url", "rpc_timeout", "stuck_after"]
