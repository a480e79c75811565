"""The composition root: one dependency-injector container wiring services to adapters.

Adapters are chosen by settings (`WALLETCORE_REPO=memory`, `WALLETCORE_PRICES=sandbox`, ...)
and resolved through entry points (`walletcore.plugins`). Tests swap one with
`container.repo.override(providers.Object(fake))`.
"""

from __future__ import annotations

from typing import Any

from dependency_injector import containers, providers

from walletcore import plugins
from walletcore.clock import SystemClock
from walletcore.ports import Lifecycle
from walletcore.secretfiles import ConfigurationError, operator_secret
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.auth import AuthService
from walletcore.services.market import MarketService
from walletcore.services.sends import SendService
from walletcore.services.tokens import TokenSigner
from walletcore.services.trading import TradingService
from walletcore.services.wallet_reads import WalletReads
from walletcore.services.wallets import WalletService
from walletcore.settings import Profile, Settings

#: Adapter names that only the sandbox profile may run.
SANDBOX_ONLY = {
    "repo": {"memory"},
    "prices": {"sandbox"},
    "venue": {"sandbox"},
    "chains": {"sandbox", "devnet"},
}


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(Settings)
    clock = providers.Singleton(SystemClock)

    repo = providers.Singleton(
        plugins.build, "walletcore.repos", settings.provided.repo, settings=settings, clock=clock
    )
    prices = providers.Singleton(
        plugins.build,
        "walletcore.price_sources",
        settings.provided.prices,
        settings=settings,
        clock=clock,
    )
    venue = providers.Singleton(
        plugins.build, "walletcore.venues", settings.provided.venue, settings=settings, clock=clock
    )

    token_key = providers.Singleton(
        operator_secret, settings, "token_signing_key", "token-signing.key"
    )
    master_key = providers.Singleton(operator_secret, settings, "master_key", "master.key")
    keystore = providers.Singleton(
        plugins.build,
        "walletcore.keystores",
        settings.provided.keystore,
        settings=settings,
        clock=clock,
        master_key=master_key,
    )

    token_signer = providers.Singleton(TokenSigner, token_key)
    auditor = providers.Singleton(Auditor, repo, clock)
    asset_policy = providers.Singleton(AssetPolicy, settings)

    auth = providers.Singleton(AuthService, repo, clock, token_signer, auditor)
    market = providers.Singleton(MarketService, prices, asset_policy)
    trading = providers.Singleton(
        TradingService,
        repo,
        clock,
        prices,
        venue,
        asset_policy,
        auditor,
        quote_ttl_seconds=settings.provided.quote_ttl_seconds,
        page_size=settings.provided.trades_page_size,
    )
    wallets = providers.Singleton(WalletService, repo, clock, keystore, asset_policy, auditor)

    # wallet operations on chain: functions the core cannot import (walletcore_chains), found
    # through entry points, and one ChainGateway per chain (`WALLETCORE_CHAINS`)
    address_validator = providers.Singleton(
        plugins.load, "walletcore.address_validators", "default"
    )
    signature_verifier = providers.Singleton(
        plugins.load, "walletcore.signature_verifiers", "default"
    )
    gateways = providers.Singleton(
        plugins.build,
        "walletcore.chains",
        settings.provided.chains,
        settings=settings,
        clock=clock,
        address_validator=address_validator,
        signature_verifier=signature_verifier,
        repo=repo,  # its nonce leases: EVM sends across processes (docs/chains.md)
    )
    wallet_reads = providers.Singleton(
        WalletReads,
        repo,
        gateways,
        asset_policy,
        page_size=settings.provided.transactions_page_size,
    )
    sends = providers.Singleton(SendService, repo, clock, keystore, gateways, asset_policy, auditor)


def create_container(settings: Settings | None = None, **overrides: Any) -> Container:
    """A container for `settings` (default: from the environment), adapters overridable by
    keyword: `create_container(repo=my_repo, clock=my_clock)`."""
    container = Container()
    if settings is not None:
        container.settings.override(providers.Object(settings))
    for name, value in overrides.items():
        provider = getattr(container, name, None)
        if not isinstance(provider, providers.Provider):
            raise TypeError(f"the container has no provider {name!r}")
        provider.override(providers.Object(value))
    return container


def check_profile(container: Container) -> None:
    """Production refuses sandbox adapters and generated secrets."""
    settings: Settings = container.settings()
    if settings.profile is not Profile.PRODUCTION:
        return
    for field, names in SANDBOX_ONLY.items():
        chosen = getattr(settings, field)
        if chosen in names:
            raise ConfigurationError(
                f"WALLETCORE_{field.upper()}={chosen} is a sandbox adapter; the production "
                "profile refuses to start on it"
            )
    container.token_key()
    container.master_key()


async def start(container: Container) -> None:
    """Start the adapters that have background work (price refresh, connections)."""
    check_profile(container)
    for provider in (container.repo, container.prices, container.venue):
        adapter = provider()
        if isinstance(adapter, Lifecycle):
            await adapter.start()
    for gateway in container.gateways().values():
        if isinstance(gateway, Lifecycle):
            await gateway.start()


async def stop(container: Container) -> None:
    for gateway in container.gateways().values():
        if isinstance(gateway, Lifecycle):
            await gateway.aclose()
    for provider in (container.venue, container.prices, container.repo):
        adapter = provider()
        if isinstance(adapter, Lifecycle):
            await adapter.aclose()
