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
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pydantic import Field, SecretStr, field_validator

from walletcore.chainplugins import (
    ChainPlugin,
    GatewayContext,
    GatewayFactory,
    KeyDerivation,
    env_name,
)
from walletcore.domain.assets import CONTRACT_ASSETS, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.curves import verify_secp256k1
from walletcore_chains.settings import ChainSettings, network, node_url, rpc_timeout, stuck_after

PATH = "m/44'/60'/0'/0/0"
CHAINS = frozenset({Chain.ETHEREUM, Chain.BSC, Chain.POLYGON})
RPC_NETWORKS = ("mainnet", "testnet")
_ADDRESS = re.compile(r"\A0x[0-9a-fA-F]{40}\Z")
_TOKEN_STANDARDS = frozenset({"ERC20", "BEP20"})
#: The assets this plugin declares (the contract's, of its chains): what
#: `WALLETCORE_EVM_TOKENS` may name.
_DECLARED = {a.id: a for a in CONTRACT_ASSETS if a.chain in CHAINS}


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

    def rpc_url(self, chain: Chain) -> SecretStr | None:
        url: SecretStr | None = getattr(self, _url_field(chain))
        return url


def _url_field(chain: Chain) -> str:
    return f"{chain.value.lower()}_rpc_url"


# -- the chains' definition ---------------------------------------------------------------
def validate_address(chain: Chain, address: object) -> str:
    """The EIP-55 form of the address, or `InvalidRequest` saying what is wrong.
    Surrounding whitespace is ignored."""
    from eth_utils.address import to_checksum_address

    chain = Chain(chain)
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {chain} address is required")
    text = address.strip()
    if not _ADDRESS.match(text):
        raise InvalidRequest(f"Invalid {chain} address: expected 0x and 40 hex digits")
    checksummed = str(to_checksum_address(text))
    body = text[2:]
    if body != body.lower() and body != body.upper() and text != checksummed:
        raise InvalidRequest(f"Invalid {chain} address: EIP-55 checksum mismatch")
    if int(body, 16) == 0:
        raise InvalidRequest(f"Invalid {chain} address: the zero address cannot receive funds")
    return checksummed


def address_of(public_key: bytes) -> str:
    """The EIP-55 address of a compressed public key."""
    from eth_keys.datatypes import PublicKey

    return str(PublicKey.from_compressed_bytes(bytes(public_key)).to_checksum_address())


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    return verify_secp256k1(address_of, address, payload, signature)


# -- gateways -----------------------------------------------------------------------------
def rpc_web3(url: str, timeout: float, chain: Chain | None = None) -> Any:
    """An `AsyncWeb3` on a JSON-RPC endpoint: no retries of its own (a failed call is
    answered at once: 503, or an unknown broadcast outcome). On BSC and POLYGON
    (`POA_CHAINS`) a block's `extraData` holds the validator's seal (97 bytes and more),
    which web3 refuses (`ExtraDataLengthError`) unless `ExtraDataToPOAMiddleware` reads
    it first (layer 0)."""
    from web3 import AsyncHTTPProvider, AsyncWeb3
    from web3.middleware import ExtraDataToPOAMiddleware

    from walletcore_chains.evm.config import POA_CHAINS

    provider = AsyncHTTPProvider(
        url, request_kwargs={"timeout": timeout}, exception_retry_configuration=None
    )
    w3 = AsyncWeb3(provider)
    if chain in POA_CHAINS:
        w3.middleware_onion.inject(ExtraDataToPOAMiddleware, layer=0)
    return w3


def _rpc_needs(chain: Chain, settings: EvmSettings) -> Iterator[str]:
    from walletcore_chains.evm.config import token_overrides

    if settings.evm_network not in RPC_NETWORKS:
        yield (
            f"{env_name(EvmSettings, 'evm_network')}={settings.evm_network} is not an RPC "
            f"network ({', '.join(RPC_NETWORKS)}); the in-process chains are "
            "WALLETCORE_CHAINS=devnet"
        )
    if settings.rpc_url(chain) is None:
        yield f"{env_name(EvmSettings, _url_field(chain))} is required by {chain}'s rpc gateway"
    try:
        token_overrides(chain, settings.evm_tokens)
    except ConfigurationError as exc:
        yield str(exc)


def _rpc(context: GatewayContext[EvmSettings]) -> ChainGateway:
    """`EvmGateway` on the chain's JSON-RPC node; its nonces are reserved on the
    deployment's nonce leases, keyed `eip155:<chain id>` (a testnet's floors never touch
    mainnet's)."""
    from walletcore_chains.evm.config import evm_config
    from walletcore_chains.evm.gateway import EvmGateway
    from walletcore_chains.evm.nonces import NonceBook

    settings, chain = context.settings, context.chain
    url = settings.rpc_url(chain)
    if url is None:  # `_rpc_needs` said so first
        raise ConfigurationError(f"{env_name(EvmSettings, _url_field(chain))} is required")
    w3 = rpc_web3(url.get_secret_value(), settings.evm_rpc_timeout_seconds, chain)
    config = evm_config(chain, settings.evm_network, settings.evm_tokens)
    config = replace(config, history_blocks=settings.evm_history_blocks)
    if settings.evm_stuck_after_seconds is not None:
        config = replace(config, stuck_after_seconds=settings.evm_stuck_after_seconds)
    nonces = NonceBook(leases=context.nonce_leases(), chain=f"eip155:{config.chain_id}")
    return EvmGateway(
        config,
        w3,
        context.validate_address,
        nonces=nonces,
        receipt_timeout=settings.evm_receipt_timeout_seconds,
    )


def _devnet(context: GatewayContext[EvmSettings]) -> ChainGateway:
    """An in-process py-evm chain (eth-tester) with the table's tokens deployed. Its nonces
    stay on the process's own book: the chain lives and dies with the process, so floors
    shared with other workers, or kept across restarts, would point past its nonces."""
    from walletcore_chains.evm.devnet import DevnetEvmGateway

    return DevnetEvmGateway(
        context.chain, context.validate_address, context.catalog.assets_of(context.chain)
    )


#: Entry point `walletcore.chains: evm`.
PLUGIN: ChainPlugin[EvmSettings] = ChainPlugin(
    name="evm",
    chains=CHAINS,
    settings_model=EvmSettings,
    validate_address=validate_address,
    verify_signature=verify_signature,
    keys={chain: KeyDerivation(PATH, "secp256k1", address_of) for chain in CHAINS},
    gateways={
        "rpc": GatewayFactory(_rpc, needs=_rpc_needs),
        "devnet": GatewayFactory(_devnet, sandbox_only=True),
    },
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
