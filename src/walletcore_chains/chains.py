"""Entry points of `walletcore.chains` for the real gateways (docs/chains.md).

- `rpc`: ETHEREUM, BSC and POLYGON through `EvmGateway` on JSON-RPC nodes, SOLANA through
  `SolanaGateway` on a Solana JSON-RPC node (`WALLETCORE_RPC_<CHAIN>`,
  `WALLETCORE_NETWORK=mainnet|testnet`). BITCOIN and TRON have no real gateway yet: on the
  sandbox profile they stay on the sandbox ledger; the production profile refuses to
  start without them.
- `devnet` (sandbox profile): ETHEREUM, BSC and POLYGON each on an in-process py-evm chain
  (eth-tester) with the asset table's tokens deployed at start-up; SOLANA on an in-process
  LiteSVM runtime with the SPL mints created at start-up; BITCOIN and TRON on the sandbox
  ledger.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore_chains.evm.config import EVM_CHAINS, evm_config


def _ledger_chains(
    settings: Any, name: str, real: frozenset[Chain], **deps: Any
) -> dict[Chain, ChainGateway]:
    """The chains outside `real`, on the sandbox ledger (sandbox profile only)."""
    if str(getattr(settings, "profile", "sandbox")) != "sandbox":
        raise ConfigurationError(
            f"WALLETCORE_CHAINS={name} has no production gateway for "
            f"{', '.join(sorted(c.value for c in set(Chain) - real))} yet; the production "
            "profile refuses to start on it"
        )
    from walletcore.sandbox.chain import build as sandbox_build

    ledger = sandbox_build(settings=settings, **deps)
    return {c: g for c, g in ledger.items() if c not in real}


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


def build_rpc(*, settings: Any, address_validator: Any, **deps: Any) -> dict[Chain, ChainGateway]:
    """Entry point `walletcore.chains: rpc`.

    `repo` (from the container): each EVM gateway reserves nonces on its nonce leases, so
    every process on that store takes turns per address (without it: this process only).
    """
    from walletcore_chains.evm.gateway import EvmGateway
    from walletcore_chains.evm.nonces import NonceBook

    network = str(settings.network)
    if network not in ("mainnet", "testnet"):
        raise ConfigurationError(
            f"WALLETCORE_NETWORK={network} is not an RPC network (mainnet, testnet); "
            "the in-process chains are WALLETCORE_CHAINS=devnet"
        )
    from walletcore_chains.solana.config import solana_mints
    from walletcore_chains.solana.gateway import SolanaGateway
    from walletcore_chains.solana.rpc import RpcNode, rpc_client

    def url_of(chain: Chain) -> str:
        url = getattr(settings, f"rpc_{chain.value.lower()}", None)
        if url is None:
            raise ConfigurationError(
                f"WALLETCORE_RPC_{chain.value} is required by WALLETCORE_CHAINS=rpc"
            )
        return str(url.get_secret_value())

    timeout = float(settings.rpc_timeout_seconds)
    real = frozenset({*EVM_CHAINS, Chain.SOLANA})
    urls = {chain: url_of(chain) for chain in sorted(real, key=lambda c: c.value)}
    mints = solana_mints(
        network,
        usdt=getattr(settings, "solana_usdt_mint", None),
        usdc=getattr(settings, "solana_usdc_mint", None),
    )
    others = _ledger_chains(settings, "rpc", real, address_validator=address_validator, **deps)
    gateways: dict[Chain, ChainGateway] = {}
    repo = deps.get("repo")
    if repo is not None and not callable(getattr(repo, "nonce_leases", None)):
        raise ConfigurationError(
            f"the repo {type(repo).__name__} has no nonce_leases(): EVM sends from several "
            "processes would share nonces (walletcore.ports.Repo, docs/chains.md)"
        )
    leases = repo.nonce_leases() if repo is not None else None
    for chain in EVM_CHAINS:
        w3 = rpc_web3(urls[chain], timeout, chain)
        config = evm_config(chain, network, getattr(settings, "evm_tokens", None))
        config = replace(config, history_blocks=int(settings.evm_history_blocks))
        # nonces are per chain id: a testnet's floors never touch mainnet's
        nonces = NonceBook(leases=leases, chain=f"eip155:{config.chain_id}")
        gateways[chain] = EvmGateway(
            config,
            w3,
            address_validator,
            nonces=nonces,
            receipt_timeout=float(settings.evm_receipt_timeout_seconds),
        )
    gateways[Chain.SOLANA] = SolanaGateway(
        RpcNode(rpc_client(urls[Chain.SOLANA], timeout)), address_validator, mints
    )
    return {**others, **gateways}


def build_devnet(
    *, settings: Any, address_validator: Any, **deps: Any
) -> dict[Chain, ChainGateway]:
    """Entry point `walletcore.chains: devnet` (sandbox profile only)."""
    from walletcore_chains.evm.devnet import DevnetEvmGateway
    from walletcore_chains.solana.devnet import DevnetSolanaGateway

    real = frozenset({*EVM_CHAINS, Chain.SOLANA})
    others = _ledger_chains(settings, "devnet", real, address_validator=address_validator, **deps)
    # Each devnet chain lives in one process and starts empty with it: its nonces stay on
    # the process's own NonceBook. The repo's leases would share floors between workers
    # that each have their own chain, and keep them across restarts (gaps: stalled sends).
    devnets: dict[Chain, ChainGateway] = {
        chain: DevnetEvmGateway(chain, address_validator) for chain in EVM_CHAINS
    }
    devnets[Chain.SOLANA] = DevnetSolanaGateway(address_validator)
    return {**others, **devnets}


__all__ = ["build_devnet", "build_rpc", "rpc_web3"]
