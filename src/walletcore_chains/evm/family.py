"""The EVM family, reusable: a chain plugin for any EVM chain from the caller's values.

The built-in plugin `evm` (ETHEREUM, BSC, POLYGON) is built here too. A third party that
adds an EVM chain (an L2 with its own chain id, native coin and token contracts) writes
no gateway: it declares the chain (`EvmChain`: the chain, its assets, its networks'
`EvmConfig`, its default fee cap and the sandbox ledger's gas price) and builds its plugin
(`evm_plugin(name, [chain])`), named by an entry point of `walletcore.chains`, in its own
package (docs/chains.md, "EVM: a chain of your own", has a worked example).

The plugin defines its chains (EVM addresses and keys: `m/44'/60'/0'/0/0`, the same
address as on ETHEREUM), describes them (`EvmChain.description`), and serves them with
`EvmGateway` in the mode `rpc`, which also scans the chain for deposits
(`walletcore_chains.evm.deposits`). Its settings (`evm_settings_model`) are per chain:
`WALLETCORE_<CHAIN>_RPC_URL` (required), `_NETWORK` (a key of `networks`; the first by
default), `_TOKENS` (asset id -> checksummed contract, JSON, over the network's table),
`_RPC_TIMEOUT_SECONDS`, `_RECEIPT_TIMEOUT_SECONDS`, `_HISTORY_BLOCKS`,
`_STUCK_AFTER_SECONDS`, `_SCAN_SPAN` (most blocks one deposit scan covers, 500). Nonces
are reserved on the deployment's nonce leases under `eip155:<chain id>`. A deployment
serves the chain only when it names it: `WALLETCORE_CHAIN_<CHAIN>=<plugin>:rpc`.

Chain libraries are imported when a gateway is built, not with this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol, cast

from pydantic import Field, SecretStr, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import (
    ChainPlugin,
    GatewayContext,
    GatewayFactory,
    KeyDerivation,
    env_name,
)
from walletcore.domain.assets import Asset, Chain
from walletcore.domain.chains import (
    ChainDescription,
    FeeQuote,
    HashFormat,
    SandboxBook,
    SendMinimum,
    WrongPassword,
)
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.evm.addresses import (
    PATH,
    address_of,
    rpc_web3,
    validate_address,
    verify_signature,
)
from walletcore_chains.evm.config import EvmConfig, token_overrides

#: `0x` and 64 hex digits, any case on input.
EVM_HASHES = HashFormat("hex", "0x")


@dataclass(frozen=True, slots=True)
class SandboxEvm:
    """`SandboxRules` of an EVM chain: gas x gas price (21,000 gas for the native coin,
    65,000 for a token transfer), `0x` + the SHA3-256 of the raw transaction as its hash,
    no minimum."""

    #: wei per gas
    gas_price_wei: int
    native_gas: int = 21_000
    token_gas: int = 65_000
    signs_digest: bool = True
    seen_addresses_only: bool = False

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        gas = self.native_gas if asset.is_native else self.token_gas
        return FeeQuote(gas * self.gas_price_wei)

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        return None

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return "0x" + hashlib.sha3_256(raw).hexdigest()


@dataclass(frozen=True)
class EvmChain:
    """One EVM chain as a plugin of the family serves it."""

    chain: Chain
    #: Its native coin first, then its tokens (ERC20-like: `transfer`, `balanceOf`).
    assets: tuple[Asset, ...]
    #: The `rpc` networks: name -> configuration (chain id, token contracts,
    #: confirmations, EIP-1559 or legacy gas, seconds before a broadcast counts as stuck).
    networks: Mapping[str, EvmConfig]
    #: The most one transaction of a transfer may cost in fees, in the native coin, when
    #: `WALLETCORE_FEE_CAPS` names no cap for the chain.
    default_fee_cap: Decimal
    #: The gas price the sandbox ledger charges, in wei per gas.
    sandbox_gas_price_wei: int
    #: Whether blocks carry a proof-of-authority seal in `extraData` (BSC, POLYGON).
    poa: bool = False
    description: ChainDescription = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.networks:
            raise ValueError(f"the EVM chain {self.chain} names no network")
        token_ids = {a.id for a in self.assets if not a.is_native}
        for name, config in self.networks.items():
            if config.chain != self.chain:
                raise ValueError(f"network {name} of {self.chain} is configured for {config.chain}")
            strays = sorted(set(config.tokens) - token_ids)
            if strays:
                raise ValueError(f"network {name} of {self.chain} names unknown tokens {strays}")
        description = ChainDescription(
            chain=self.chain,
            assets=self.assets,
            replaces_by="fee-bump",
            default_fee_cap=self.default_fee_cap,
            wrong_password=WrongPassword.INVALID_CREDENTIALS,
            hashes=EVM_HASHES,
            sandbox=SandboxEvm(self.sandbox_gas_price_wei),
        )
        object.__setattr__(self, "description", description)

    def config(
        self, network: str, tokens: Mapping[int, str], assets: Mapping[int, Asset]
    ) -> EvmConfig:
        """The chain's configuration on `network`, with its contracts among `tokens` over
        the network's table (`ConfigurationError` for a bad token)."""
        config = self.networks[network]
        overrides = token_overrides(self.chain, tokens, assets)
        return replace(config, tokens={**config.tokens, **overrides}) if overrides else config


class EvmKnobs(Protocol):
    """What the family's gateways read of a plugin's settings, per chain."""

    def rpc_url(self, chain: Chain) -> SecretStr | None: ...
    def network_of(self, chain: Chain) -> str: ...
    def tokens_of(self, chain: Chain) -> Mapping[int, str]: ...
    def rpc_timeout_of(self, chain: Chain) -> float: ...
    def receipt_timeout_of(self, chain: Chain) -> float: ...
    def history_blocks_of(self, chain: Chain) -> int: ...
    def stuck_after_of(self, chain: Chain) -> float | None: ...
    def scan_span_of(self, chain: Chain) -> int: ...
    #: The variable of a setting (`rpc_url`, `network`, `tokens`) of `chain`, for messages.
    def variable_of(self, chain: Chain, setting: str) -> str: ...


class EvmChainSettings(BaseSettings):
    """The base of the settings `evm_settings_model` builds: one group of fields per
    chain, `<chain>_<setting>`, read from `WALLETCORE_<CHAIN>_<SETTING>`."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    def _of(self, chain: Chain, setting: str) -> Any:
        return getattr(self, _field(chain, setting))

    def rpc_url(self, chain: Chain) -> SecretStr | None:
        return cast(SecretStr | None, self._of(chain, "rpc_url"))

    def network_of(self, chain: Chain) -> str:
        return str(self._of(chain, "network"))

    def tokens_of(self, chain: Chain) -> Mapping[int, str]:
        return cast(Mapping[int, str], self._of(chain, "tokens"))

    def rpc_timeout_of(self, chain: Chain) -> float:
        return float(self._of(chain, "rpc_timeout_seconds"))

    def receipt_timeout_of(self, chain: Chain) -> float:
        return float(self._of(chain, "receipt_timeout_seconds"))

    def history_blocks_of(self, chain: Chain) -> int:
        return int(self._of(chain, "history_blocks"))

    def stuck_after_of(self, chain: Chain) -> float | None:
        return cast(float | None, self._of(chain, "stuck_after_seconds"))

    def scan_span_of(self, chain: Chain) -> int:
        return int(self._of(chain, "scan_span"))

    def variable_of(self, chain: Chain, setting: str) -> str:
        return env_name(type(self), _field(chain, setting))


def _field(chain: Chain, setting: str) -> str:
    return f"{str(chain).lower()}_{setting}"


def evm_settings_model(
    chains: Sequence[EvmChain], name: str = "EvmChainSettings"
) -> type[EvmChainSettings]:
    """A pydantic-settings model with each chain's settings (see the module's docstring)."""
    fields: dict[str, Any] = {}
    for spec in chains:
        f = spec.chain
        fields[_field(f, "rpc_url")] = (SecretStr | None, None)
        fields[_field(f, "network")] = (str, next(iter(spec.networks)))
        fields[_field(f, "tokens")] = (dict[int, str], Field(default_factory=dict))
        fields[_field(f, "rpc_timeout_seconds")] = (float, Field(default=20.0, gt=0, le=600))
        fields[_field(f, "receipt_timeout_seconds")] = (float, Field(default=120.0, gt=0, le=3600))
        fields[_field(f, "history_blocks")] = (int, Field(default=2_000, ge=1, le=1_000_000))
        fields[_field(f, "stuck_after_seconds")] = (
            float | None,
            Field(default=None, gt=0, le=86_400),
        )
        fields[_field(f, "scan_span")] = (int, Field(default=500, ge=1, le=100_000))
    model = create_model(name, __base__=EvmChainSettings, **fields)
    return model


@dataclass(frozen=True)
class _Family:
    chains: Mapping[Chain, EvmChain]
    devnet: bool

    @property
    def assets(self) -> dict[int, Asset]:
        return {a.id: a for spec in self.chains.values() for a in spec.assets}

    def needs(self, chain: Chain, settings: EvmKnobs) -> Iterator[str]:
        spec = self.chains[chain]
        network = settings.network_of(chain)
        if network not in spec.networks:
            hint = "; the in-process chains are WALLETCORE_CHAINS=devnet" if self.devnet else ""
            yield (
                f"{settings.variable_of(chain, 'network')}={network} is not an RPC "
                f"network ({', '.join(spec.networks)}){hint}"
            )
        if settings.rpc_url(chain) is None:
            yield f"{settings.variable_of(chain, 'rpc_url')} is required by {chain}'s rpc gateway"
        try:
            token_overrides(
                chain, settings.tokens_of(chain), self.assets, settings.variable_of(chain, "tokens")
            )
        except ConfigurationError as exc:
            yield str(exc)

    def rpc(self, context: GatewayContext[Any]) -> ChainGateway:
        """`EvmGateway` on the chain's JSON-RPC node; its nonces are reserved on the
        deployment's nonce leases, keyed `eip155:<chain id>` (a testnet's floors never
        touch mainnet's)."""
        from walletcore_chains.evm.gateway import EvmGateway
        from walletcore_chains.evm.nonces import NonceBook

        settings: EvmKnobs = context.settings
        chain = context.chain
        spec = self.chains[chain]
        url = settings.rpc_url(chain)
        if url is None:  # `needs` said so first
            raise ConfigurationError(f"{settings.variable_of(chain, 'rpc_url')} is required")
        w3 = rpc_web3(url.get_secret_value(), settings.rpc_timeout_of(chain), chain, poa=spec.poa)
        config = spec.config(settings.network_of(chain), settings.tokens_of(chain), self.assets)
        config = replace(
            config,
            history_blocks=settings.history_blocks_of(chain),
            scan_span=settings.scan_span_of(chain),
        )
        stuck = settings.stuck_after_of(chain)
        if stuck is not None:
            config = replace(config, stuck_after_seconds=stuck)
        nonces = NonceBook(leases=context.nonce_leases(), chain=f"eip155:{config.chain_id}")
        return EvmGateway(
            config,
            w3,
            context.validate_address,
            nonces=nonces,
            receipt_timeout=settings.receipt_timeout_of(chain),
            assets=context.catalog.assets_of(chain),
        )


def _devnet(context: GatewayContext[Any]) -> ChainGateway:
    """An in-process py-evm chain (eth-tester) with the table's tokens deployed. Its nonces
    stay on the process's own book: the chain lives and dies with the process, so floors
    shared with other workers, or kept across restarts, would point past its nonces."""
    from walletcore_chains.evm.devnet import DevnetEvmGateway

    return DevnetEvmGateway(context.chain, context.validate_address, context.description.assets)


def evm_plugin(
    name: str,
    chains: Sequence[EvmChain],
    *,
    settings_model: type[Any] | None = None,
    devnet: bool = False,
) -> ChainPlugin[Any]:
    """A chain plugin that defines, describes and serves `chains` (see the module's
    docstring). `settings_model`: a pydantic-settings model with the `EvmKnobs` methods
    (by default `evm_settings_model(chains)`); `devnet`: offer the in-process py-evm chain
    (the asset table's EVM chains only)."""
    if not chains:
        raise ValueError(f"the EVM plugin {name} names no chain")
    family = _Family({spec.chain: spec for spec in chains}, devnet)
    if len(family.chains) != len(chains):
        raise ValueError(f"the EVM plugin {name} names a chain twice")
    gateways: dict[str, GatewayFactory[Any]] = {
        "rpc": GatewayFactory(family.rpc, needs=family.needs)
    }
    if devnet:
        gateways["devnet"] = GatewayFactory(_devnet, sandbox_only=True)
    return ChainPlugin(
        name=name,
        chains=frozenset(family.chains),
        settings_model=settings_model or evm_settings_model(chains),
        validate_address=validate_address,
        verify_signature=verify_signature,
        keys={c: KeyDerivation(PATH, "secp256k1", address_of) for c in family.chains},
        gateways=gateways,
        describes={c: spec.description for c, spec in family.chains.items()},
    )


__all__ = [
    "EVM_HASHES",
    "EvmChain",
    "EvmChainSettings",
    "EvmKnobs",
    "SandboxEvm",
    "evm_plugin",
    "evm_settings_model",
]
