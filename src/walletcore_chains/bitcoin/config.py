"""Settings of the `bitcoin` plugin and its `rpc` gateway factory (docs/bitcoin.md).

Every variable is `WALLETCORE_BITCOIN_...`; URLs are secrets (they often carry an API key
or the node's RPC password): never logged, never in a repr or an error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr

from walletcore.chainplugins import GatewayContext, GatewayFactory, env_name
from walletcore.domain.assets import Chain
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.bitcoin.network import ENV, NETWORKS, current_network
from walletcore_chains.settings import ChainSettings, node_url, rpc_timeout, stuck_after

if TYPE_CHECKING:
    from walletcore_chains.bitcoin.backend import Backend


class BitcoinSettings(ChainSettings):
    """Settings of the `bitcoin` plugin (`WALLETCORE_` + the field's name in capitals)."""

    #: mainnet, testnet, testnet4, signet or regtest: also the process's address network
    #: (`network.current_network`, read from the same variable); never `WALLETCORE_NETWORK`,
    #: which would silently move every stored Bitcoin address with the EVM chains' network.
    bitcoin_network: str = "mainnet"
    #: `esplora` (an Esplora HTTP API: self-hosted electrs, a public explorer) or `core`
    #: (a Bitcoin Core node's JSON-RPC with a watch-only descriptor wallet)
    bitcoin_backend: Literal["esplora", "core"] = "esplora"
    #: the Esplora API's base URL, e.g. `https://host/api` (a secret)
    bitcoin_esplora_url: SecretStr | None = node_url()
    #: Bitcoin Core's JSON-RPC URL with its credentials, `http://user:pass@host:8332` (a
    #: secret); the node needs `-txindex=1`
    bitcoin_rpc_url: SecretStr | None = node_url()
    #: the watch-only descriptor wallet the gateway creates (or loads) on the node
    bitcoin_rpc_wallet: str = "walletcore-watch"
    bitcoin_rpc_timeout_seconds: float = rpc_timeout("BITCOIN")
    #: blocks deep before a transaction reads `success` (default: the network's, 3; 1 on
    #: regtest)
    bitcoin_confirmations: int | None = Field(default=None, ge=1, le=1000)
    #: the fee-rate estimate's target, in blocks
    bitcoin_fee_target_blocks: int = Field(default=3, ge=1, le=1008)
    #: the floor in sat/vB when the backend cannot tell the node's minimum relay fee
    #: (Esplora has no endpoint for it); Core reports its own
    bitcoin_min_fee_rate: float = Field(default=1.0, gt=0, le=10_000)
    #: sat/vB used when the backend has no estimate; unset: 503 on a network other than
    #: regtest (never a guess with real money), the floor on regtest
    bitcoin_fallback_fee_rate: float | None = Field(default=None, gt=0, le=10_000)
    #: Core: the rescan of an address imported into the watch-only wallet starts at this
    #: unix time (0: the chain's start; complete, slow on mainnet without block filters)
    bitcoin_core_rescan_since: int = Field(default=0, ge=0)
    #: Core: how many of the wallet's latest entries `/transactions` looks through
    bitcoin_core_history_depth: int = Field(default=1000, ge=10, le=100_000)
    #: how long a send waits for the backend to show the transaction it just broadcast,
    #: before the next send from the address may select coins (read-your-writes)
    bitcoin_index_wait_seconds: float = Field(default=10.0, ge=0, le=300)
    #: seconds a send stays pending before it counts as stuck and the transfer follower
    #: broadcasts its next replace-by-fee rung (default: 3600; 30 on regtest)
    bitcoin_stuck_after_seconds: float | None = stuck_after(None, most=7 * 86_400)


def _rpc_needs(chain: Chain, settings: BitcoinSettings) -> Iterator[str]:
    network = settings.bitcoin_network.strip().lower()
    if network not in NETWORKS:
        yield (
            f"{env_name(BitcoinSettings, 'bitcoin_network')}={settings.bitcoin_network} is "
            f"not a Bitcoin network ({', '.join(NETWORKS)})"
        )
    else:
        try:
            process = current_network().name
        except ConfigurationError as exc:
            yield str(exc)
        else:
            if process != network:
                yield (
                    f"the BITCOIN gateway is set for {network} but this process derives and "
                    f"accepts {process} addresses: set {ENV}={network} in the environment"
                )
    if settings.bitcoin_backend == "esplora" and settings.bitcoin_esplora_url is None:
        yield (
            f"{env_name(BitcoinSettings, 'bitcoin_esplora_url')} is required by {chain}'s rpc "
            f"gateway on the esplora backend (or set "
            f"{env_name(BitcoinSettings, 'bitcoin_backend')}=core and "
            f"{env_name(BitcoinSettings, 'bitcoin_rpc_url')})"
        )
    if settings.bitcoin_backend == "core" and settings.bitcoin_rpc_url is None:
        yield (
            f"{env_name(BitcoinSettings, 'bitcoin_rpc_url')} is required by {chain}'s rpc "
            "gateway on the core backend"
        )


def _rpc(context: GatewayContext[BitcoinSettings]) -> ChainGateway:
    """`BitcoinGateway` on the chosen backend; coin selection is serialised per address
    on the deployment's nonce leases, keyed `bip122:<genesis>` (docs/bitcoin.md)."""
    from walletcore_chains.bitcoin.gateway import BitcoinGateway, GatewayOptions
    from walletcore_chains.bitcoin.network import network_named
    from walletcore_chains.evm.nonces import NonceBook

    settings = context.settings
    network = network_named(settings.bitcoin_network)
    backend = make_backend(settings)
    options = GatewayOptions.of(settings, network)
    book = NonceBook(leases=context.nonce_leases(), chain=network.lease_key)
    return BitcoinGateway(
        network,
        backend,
        context.validate_address,
        book,
        options,
        chain=context.chain,
        native=context.catalog.native_asset(context.chain),
    )


def make_backend(settings: BitcoinSettings) -> Backend:
    """The backend the settings name (`esplora` or `core`)."""
    timeout = settings.bitcoin_rpc_timeout_seconds
    if settings.bitcoin_backend == "core":
        from walletcore_chains.bitcoin.core import CoreBackend

        if settings.bitcoin_rpc_url is None:
            raise ConfigurationError(f"{env_name(BitcoinSettings, 'bitcoin_rpc_url')} is required")
        return CoreBackend(
            settings.bitcoin_rpc_url.get_secret_value(),
            wallet=settings.bitcoin_rpc_wallet,
            timeout=timeout,
            rescan_since=settings.bitcoin_core_rescan_since,
            history_depth=settings.bitcoin_core_history_depth,
        )
    from walletcore_chains.bitcoin.esplora import EsploraBackend

    if settings.bitcoin_esplora_url is None:
        raise ConfigurationError(f"{env_name(BitcoinSettings, 'bitcoin_esplora_url')} is required")
    return EsploraBackend(
        settings.bitcoin_esplora_url.get_secret_value(),
        timeout=timeout,
        min_fee_rate=settings.bitcoin_min_fee_rate,
    )


rpc_gateway: GatewayFactory[BitcoinSettings] = GatewayFactory(_rpc, needs=_rpc_needs)

__all__ = ["BitcoinSettings", "make_backend", "rpc_gateway"]
