"""The chain plugin `evm`: ETHEREUM, BSC and POLYGON (docs/chains.md).

- Addresses: `0x` and 40 hex digits; mixed case must carry a valid EIP-55 checksum; the
  zero address is refused; normalised to the EIP-55 form.
- Keys: `m/44'/60'/0'/0/0`, secp256k1, one address for the three chains. Signatures:
  `r || s || recovery id` over a 32-byte digest, low-S.
- Gateways: `rpc` (`EvmGateway` on a JSON-RPC node per chain) and `devnet` (an in-process
  py-evm chain per chain, sandbox profile only).
- Settings (`EvmSettings`): `WALLETCORE_<CHAIN>_RPC_URL`, `WALLETCORE_EVM_NETWORK`,
  `WALLETCORE_EVM_TOKENS`, ...; the names before the plugins (`WALLETCORE_RPC_<CHAIN>`,
  `WALLETCORE_NETWORK`, `WALLETCORE_RPC_TIMEOUT_SECONDS`) are read too.

Chain libraries are imported when a gateway is built, not with this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import Field, SecretStr, field_validator

from walletcore.chainplugins import ChainPlugin, env_name
from walletcore.domain.assets import Chain
from walletcore_chains.evm import chains as evm_chains
from walletcore_chains.evm.addresses import (
    PATH,
    address_of,
    rpc_web3,
    validate_address,
    verify_signature,
)
from walletcore_chains.evm.family import evm_plugin
from walletcore_chains.settings import ChainSettings, network, node_url, rpc_timeout, stuck_after

CHAINS = frozenset(spec.chain for spec in evm_chains.CHAINS)
RPC_NETWORKS = ("mainnet", "testnet")
_ADDRESS = re.compile(r"\A0x[0-9a-fA-F]{40}\Z")
_TOKEN_STANDARDS = frozenset({"ERC20", "BEP20"})
#: The assets this plugin's chains declare (`evm_chains`): what `WALLETCORE_EVM_TOKENS`
#: may name.
_DECLARED = {a.id: a for spec in evm_chains.CHAINS for a in spec.assets}


class EvmSettings(ChainSettings):
    """Settings of the `evm` plugin; each field's variable is `WALLETCORE_` + its name in
    capitals, and the older name after it is read too."""

    #: JSON-RPC endpoints of the `rpc` gateways (secrets: they often carry an API key).
    ethereum_rpc_url: SecretStr | None = node_url("ETHEREUM_RPC_URL", "RPC_ETHEREUM")
    bsc_rpc_url: SecretStr | None = node_url("BSC_RPC_URL", "RPC_BSC")
    polygon_rpc_url: SecretStr | None = node_url("POLYGON_RPC_URL", "RPC_POLYGON")
    #: `mainnet` or `testnet` (Sepolia, BSC testnet, Amoy) for the `rpc` gateways.
    evm_network: str = network("EVM")
    #: Seconds an RPC call may take before it counts as failed (a broadcast: unknown).
    evm_rpc_timeout_seconds: float = rpc_timeout("EVM")
    #: Token contracts over the built-in table: asset id -> checksummed 0x address, JSON
    #: (`{"21": "0x..."}`). The EIP-55 checksum is checked when the chains are planned.
    evm_tokens: dict[int, str] = Field(default_factory=dict)
    #: Seconds a sponsored transfer waits for its gas top-up to be mined.
    evm_receipt_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    #: Blocks the node-read history looks back (an indexer sees more).
    evm_history_blocks: int = Field(default=2_000, ge=1, le=1_000_000)
    #: Seconds a broadcast transfer may stay unmined before it counts as stuck and the next
    #: rung of its replacement ladder goes out; unset: the chain's own (ETHEREUM 180, BSC 45,
    #: POLYGON 60, `walletcore_chains.evm.config.STUCK_AFTER_SECONDS`).
    evm_stuck_after_seconds: float | None = stuck_after(None, most=86_400)
    #: Most blocks one deposit scan covers (`walletcore_chains.evm.deposits`).
    evm_scan_span: int = Field(default=500, ge=1, le=100_000)

    @field_validator("evm_tokens")
    @classmethod
    def _token_contracts(cls, value: dict[int, str]) -> dict[int, str]:
        for asset_id, address in value.items():
            asset = _DECLARED.get(asset_id)
            if asset is None or asset.standard not in _TOKEN_STANDARDS:
                raise ValueError(
                    f"asset {asset_id} is not a token of ETHEREUM, BSC or POLYGON "
                    "(the asset table's ERC20 and BEP20 ids)"
                )
            if not _ADDRESS.fullmatch(address.strip()):
                raise ValueError(f"the contract of asset {asset_id} is not a 0x address")
        return {asset_id: address.strip() for asset_id, address in value.items()}

    # -- `walletcore_chains.evm.family.EvmKnobs`: one network, tokens and timeouts for
    # the three chains
    def rpc_url(self, chain: Chain) -> SecretStr | None:
        url: SecretStr | None = getattr(self, _url_field(chain))
        return url

    def network_of(self, chain: Chain) -> str:
        return self.evm_network

    def tokens_of(self, chain: Chain) -> Mapping[int, str]:
        return self.evm_tokens

    def rpc_timeout_of(self, chain: Chain) -> float:
        return self.evm_rpc_timeout_seconds

    def receipt_timeout_of(self, chain: Chain) -> float:
        return self.evm_receipt_timeout_seconds

    def history_blocks_of(self, chain: Chain) -> int:
        return self.evm_history_blocks

    def stuck_after_of(self, chain: Chain) -> float | None:
        return self.evm_stuck_after_seconds

    def scan_span_of(self, chain: Chain) -> int:
        return self.evm_scan_span

    def variable_of(self, chain: Chain, setting: str) -> str:
        field = {"rpc_url": _url_field(chain), "network": "evm_network", "tokens": "evm_tokens"}
        return env_name(EvmSettings, field[setting])


def _url_field(chain: Chain) -> str:
    return f"{chain.value.lower()}_rpc_url"


#: Entry point `walletcore.chains: evm`: ETHEREUM, BSC and POLYGON, built by the family
#: (`walletcore_chains.evm.family`) from `walletcore_chains.evm.chains`.
PLUGIN: ChainPlugin[EvmSettings] = evm_plugin(
    "evm", evm_chains.CHAINS, settings_model=EvmSettings, devnet=True
)

__all__ = [
    "PATH",
    "PLUGIN",
    "EvmSettings",
    "address_of",
    "rpc_web3",
    "validate_address",
    "verify_signature",
]
