"""The composition root: one dependency-injector container wiring services to adapters.

Adapters are chosen by settings (`WALLETCORE_REPO=sql`, `WALLETCORE_PRICES=sandbox`, ...)
and resolved through entry points (`walletcore.plugins`). Tests swap one with
`container.storage.override(providers.Object(fake))`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from dependency_injector import containers, providers

from walletcore import plugins
from walletcore.chainplugins import (
    ChainDefinitions,
    ChainPlan,
    ChainPlugin,
    build_gateways,
    plan_chains,
    served_chains,
)
from walletcore.clock import SystemClock
from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.chains import ChainDescription
from walletcore.domain.trade_limits import TradeLimits
from walletcore.jobs import InProcessJobs, Jobs, JobSettings, JobsMode
from walletcore.jobs import jobs_mode as resolve_jobs_mode
from walletcore.ports import (
    AddressValidator,
    Lifecycle,
    SecretSealer,
    SignatureVerifier,
    WebhookSender,
)
from walletcore.pricing import SharedPriceSource
from walletcore.secretfiles import ConfigurationError, operator_secret
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.auth import AuthService
from walletcore.services.deposits import DepositWatch
from walletcore.services.desk import DeskAccounts, DeskSettings
from walletcore.services.events import EventFeed
from walletcore.services.health import HealthService
from walletcore.services.holdings import WalletHoldings
from walletcore.services.market import MarketService
from walletcore.services.policies import Policies
from walletcore.services.sends import SendService
from walletcore.services.settlements import Settlements, SettlementSettings
from walletcore.services.tokens import TokenSigner
from walletcore.services.trading import TradingService
from walletcore.services.transfers import Transfers, TransferSettings
from walletcore.services.wallet_reads import WalletReads
from walletcore.services.wallets import WalletService
from walletcore.services.webhooks import PlainSecrets, Webhooks, WebhookSettings
from walletcore.settings import Profile, Settings

log = logging.getLogger("walletcore")

#: Adapter names that only the sandbox profile may run.
SANDBOX_ONLY = {
    "repo": {"memory"},
    "prices": {"sandbox"},
    "venue": {"sandbox"},
}


def _validator(registry: Mapping[str, ChainPlugin[Any]]) -> AddressValidator:
    """Every chain's address validator: its defining plugin's."""
    return ChainDefinitions.of(registry).validate_address


def _verifier(registry: Mapping[str, ChainPlugin[Any]]) -> SignatureVerifier:
    """Every chain's signature verifier: its defining plugin's."""
    return ChainDefinitions.of(registry).verify_signature


def served_catalog(settings: Settings, registry: Mapping[str, ChainPlugin[Any]]) -> Catalog:
    """The assets this deployment serves, in catalog order: the assets the descriptions of
    the chains it serves declare (`chainplugins.served_chains`: the contract's six, in
    contract order, then each other chain the operator names that an installed plugin
    defines, by name), each described by the plugin that defines it. An installed chain
    the deployment does not name adds nothing."""
    definitions = ChainDefinitions.of(registry)
    problems: list[str] = []
    chains = served_chains(settings, definitions, problems)
    if problems:
        raise ConfigurationError(problems=problems)
    missing = [c for c in chains if c not in definitions]
    if missing:
        definitions.plugin_of(missing[0])  # raises, naming what is installed
    return Catalog((c, definitions.description(c).assets) for c in chains)


def _asset_policy(catalog: Catalog, settings: Settings) -> AssetPolicy:
    """`WALLETCORE_LIMITED_ASSETS` and `_UNAVAILABLE_ASSETS` over the served assets. Ids
    the catalog does not serve are refused when set; the defaults name only served ones."""
    limited = settings.limited_assets
    unknown = [a for a in limited if a not in catalog]
    if unknown:
        raise ConfigurationError(f"WALLETCORE_LIMITED_ASSETS: unknown asset ids: {unknown}")
    unavailable = settings.unavailable_assets
    if "unavailable_assets" in settings.model_fields_set:
        bad = sorted({a for ids in unavailable.values() for a in ids if a not in catalog})
        if bad:
            raise ConfigurationError(f"WALLETCORE_UNAVAILABLE_ASSETS: unknown asset ids: {bad}")
    else:
        unavailable = {e: [a for a in ids if a in catalog] for e, ids in unavailable.items()}
    return AssetPolicy(catalog, limited, unavailable)


def _trade_limits(catalog: Catalog, settings: Settings) -> TradeLimits:
    """`WALLETCORE_TRADE_MINIMUMS` and `_MAXIMUMS` over the served assets' defaults."""
    try:
        return TradeLimits(catalog, settings.trade_minimums, settings.trade_maximums)
    except ValueError as exc:
        raise ConfigurationError(
            f"WALLETCORE_TRADE_MINIMUMS / WALLETCORE_TRADE_MAXIMUMS: {exc}"
        ) from None


def _descriptions(plan: ChainPlan) -> dict[Chain, ChainDescription]:
    """The served chains' descriptions, from the plan's defining plugins."""
    return plan.descriptions


def _served_prices(mode: JobsMode, feed: Any, shared: Any) -> Any:
    """The upstream source itself when no jobs run; else the stored table (walletcore.jobs)."""
    return feed() if mode is JobsMode.OFF else shared()


def _retention(jobs: JobSettings) -> timedelta:
    return timedelta(days=jobs.events_retention_days)


def _allow_private_webhooks(settings: Settings, webhooks: WebhookSettings) -> bool:
    """`WALLETCORE_WEBHOOK_ALLOW_PRIVATE`, by default on the sandbox profile only."""
    if webhooks.webhook_allow_private is not None:
        return webhooks.webhook_allow_private
    return settings.profile is Profile.SANDBOX


def _webhook_sender(
    settings: Settings, webhooks: WebhookSettings, allow_private: bool
) -> WebhookSender | None:
    """The sender the settings name (`walletcore.webhook_senders`), or None when it is not
    installed (nothing is delivered; the job says so once)."""
    try:
        sender: WebhookSender = plugins.build(
            plugins.WEBHOOK_SENDERS,
            webhooks.webhook_sender,
            settings=settings,
            allow_private=allow_private,
        )
    except plugins.AdapterNotFound as exc:
        log.warning("webhooks: %s", exc)
        return None
    return sender


class _KeystoreSealer(SecretSealer):
    """The keystore's sealing of secrets (the master key), built on first use, so a
    command that seals nothing never builds the keystore; `PlainSecrets` when the
    deployment's keystore seals none (docs/security.md, "Webhook secrets")."""

    def __init__(self, keystore: Callable[[], Any]) -> None:
        self._keystore = keystore
        self._sealer: SecretSealer | None = None

    def _resolved(self) -> SecretSealer:
        if self._sealer is None:
            try:
                keystore = self._keystore()
            except plugins.AdapterNotFound as exc:
                log.warning("webhook secrets are stored unsealed: %s", exc)
                keystore = None
            if isinstance(keystore, SecretSealer):
                self._sealer = keystore
            else:
                if keystore is not None:
                    log.warning(
                        "webhook secrets are stored unsealed: the keystore %s seals none",
                        type(keystore).__name__,
                    )
                self._sealer = PlainSecrets()
        return self._sealer

    def seal_secret(self, secret: bytes) -> bytes:
        return self._resolved().seal_secret(secret)

    def open_secret(self, sealed: bytes) -> bytes:
        return self._resolved().open_secret(sealed)


def _webhooks(
    storage: Any,
    clock: Any,
    auditor: Auditor,
    sealer: SecretSealer,
    sender: Callable[[], WebhookSender | None],
    settings: Settings,
    webhooks: WebhookSettings,
    allow_private: bool,
    jobs: JobSettings,
) -> Webhooks:
    return Webhooks(
        storage,
        clock,
        auditor,
        sealer,
        sender=sender,
        schedule=webhooks.schedule,
        rotation_overlap=webhooks.rotation_overlap,
        https_only=settings.profile is not Profile.SANDBOX,
        allow_private=allow_private,
        lease=timedelta(seconds=webhooks.webhook_lease_seconds),
        batch=webhooks.webhook_batch,
        concurrency=webhooks.webhook_concurrency,
        run_events=webhooks.webhook_run_events,
        log_retention=_retention(jobs),
    )


def _jobs_monitor(mode: JobsMode, settings: Settings) -> Any:
    """The readiness check that a worker runs the jobs, when other processes run them (its
    engine's plugin, `walletcore.job_monitors`); None when this process runs them, or
    when the engine's extra is not installed (no worker could run either)."""
    if mode is not JobsMode.PROCRASTINATE:
        return None
    try:
        return plugins.build(plugins.JOB_MONITORS, mode.value, settings=settings)
    except plugins.AdapterNotFound:
        return None


def _inline_refresh(mode: JobsMode, runner: Any) -> Any:
    """In-process jobs refresh inline for a process that never started them."""
    return runner().refresh_prices_if_due if mode is JobsMode.INPROCESS else None


def _settlements(settings: SettlementSettings, *parts: Any) -> Settlements | None:
    """The settlement of trades' crypto legs, unless `WALLETCORE_SETTLEMENT_ENABLED=false`."""
    if not settings.enabled:
        return None
    return Settlements(
        *parts,
        retry_seconds=settings.retry_seconds,
        follow_seconds=settings.follow_seconds,
        max_attempts=settings.max_attempts,
    )


def _desk(
    settings: DeskSettings, settlement: SettlementSettings, *parts: Any
) -> DeskAccounts | None:
    """The desk's accounting (services/desk.py), unless trades move no coins."""
    if not settlement.enabled:
        return None
    return DeskAccounts(
        *parts,
        tolerance=settings.tolerance,
        sent_alert_seconds=settings.sent_alert_seconds,
        balance_timeout_seconds=settings.balance_timeout_seconds,
        max_attempts=settlement.max_attempts,
    )


class Container(containers.DeclarativeContainer):
    __self__ = providers.Self()
    settings = providers.Singleton(Settings)
    clock = providers.Singleton(SystemClock)

    # storage (`walletcore.repos`), and the nonce leases its plugin names next to it
    # (`walletcore.nonce_leases`, the same name): passed to the chain factories
    storage = providers.Singleton(
        plugins.build, "walletcore.repos", settings.provided.repo, settings=settings, clock=clock
    )
    nonce_leases = providers.Singleton(
        plugins.build,
        "walletcore.nonce_leases",
        settings.provided.repo,
        settings=settings,
        clock=clock,
        storage=storage,
    )
    # the upstream price source (`WALLETCORE_PRICES`); `prices` is what the services use
    price_feed = providers.Singleton(
        plugins.build,
        "walletcore.price_sources",
        settings.provided.prices,
        settings=settings,
        clock=clock,
        catalog=providers.Callable(lambda c: c.catalog(), __self__),  # defined below
    )
    # background jobs (walletcore.jobs): which engine runs them (`WALLETCORE_JOBS`), the
    # job functions, and the in-process runner of a deployment on SQLite
    job_settings = providers.Singleton(JobSettings)
    jobs_mode = providers.Singleton(resolve_jobs_mode, settings, job_settings)
    jobs = providers.Singleton(
        Jobs,
        storage=storage,
        clock=clock,
        feed=price_feed.provider,
        trading=providers.Callable(lambda c: c.trading, __self__),  # defined below
        refresh_seconds=settings.provided.price_refresh_seconds,
        settle_seconds=job_settings.provided.jobs_settle_seconds,
        settle_batch=job_settings.provided.jobs_settle_batch,
        transfers=providers.Callable(lambda c: c.transfers, __self__),  # defined below
        follow_seconds=job_settings.provided.jobs_follow_seconds,
        follow_batch=job_settings.provided.jobs_follow_batch,
        deposits=providers.Callable(lambda c: c.deposit_watch, __self__),  # defined below
        deposits_seconds=job_settings.provided.jobs_deposits_seconds,
        events=providers.Callable(lambda c: c.event_feed, __self__),  # defined below
        prune_seconds=job_settings.provided.jobs_prune_seconds,
        webhooks=providers.Callable(lambda c: c.webhooks, __self__),  # defined below
        webhook_seconds=job_settings.provided.jobs_webhook_seconds,
        settlements=providers.Callable(lambda c: c.settlements, __self__),  # defined below
        settlement_seconds=job_settings.provided.jobs_settlement_seconds,
        desk=providers.Callable(lambda c: c.desk, __self__),  # defined below
        policies=providers.Callable(lambda c: c.policies, __self__),  # defined below
        reconcile_seconds=job_settings.provided.jobs_reconcile_seconds,
        approvals_seconds=job_settings.provided.jobs_approvals_seconds,
    )
    in_process_jobs = providers.Singleton(InProcessJobs, jobs)
    # with jobs running, every process serves the table the refresh job stored
    prices = providers.Singleton(
        _served_prices,
        jobs_mode,
        price_feed.provider,
        providers.Factory(
            SharedPriceSource,
            storage,
            clock,
            symbols=providers.Callable(lambda c: c.catalog().symbols, __self__),
            max_age_seconds=settings.provided.price_max_age_seconds,
            timeout_seconds=settings.provided.price_timeout_seconds,
            cache_seconds=job_settings.provided.jobs_price_cache_seconds,
            refresh_if_due=providers.Callable(_inline_refresh, jobs_mode, in_process_jobs.provider),
        ).provider,
    )
    # a venue re-prices through the price source it is handed (or its own market data),
    # never a hidden second feed
    venue = providers.Singleton(
        plugins.build,
        "walletcore.venues",
        settings.provided.venue,
        settings=settings,
        clock=clock,
        prices=prices,
        catalog=providers.Callable(lambda c: c.catalog(), __self__),  # defined below
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
        # the chains' key derivations and verifiers, from the plugins that define them
        chain_definitions=providers.Callable(lambda c: c.chain_plan().definitions, __self__),
    )

    token_signer = providers.Singleton(TokenSigner, token_key)
    auditor = providers.Singleton(Auditor, storage, clock)

    # wallet operations on chain: one ChainPlugin per chain or family (entry points of
    # `walletcore.chains`, docs/chains.md), chosen per chain by `WALLETCORE_CHAINS` and
    # `WALLETCORE_CHAIN_<CHAIN>`; each chain's validator and verifier are its plugin's
    chain_plugins = providers.Singleton(plugins.chain_plugins)
    #: plugin name -> its settings instance, instead of reading the environment (tests,
    #: embedding): `create_container(chain_settings={"evm": EvmSettings(...)})`
    chain_settings: providers.Factory[dict[str, Any]] = providers.Factory(dict)
    chain_plan = providers.Singleton(plan_chains, settings, chain_plugins, chain_settings)
    #: the served assets (walletcore.domain.catalog), handed to every service and adapter
    #: that names an asset; overridable: `create_container(catalog=Catalog(...))`
    catalog = providers.Singleton(served_catalog, settings, chain_plugins)
    asset_policy = providers.Singleton(_asset_policy, catalog, settings)

    auth = providers.Singleton(
        AuthService,
        storage,
        clock,
        token_signer,
        auditor,
        catalog=catalog,
        client_cache_seconds=settings.provided.client_cache_seconds,
    )
    market = providers.Singleton(MarketService, prices, asset_policy)
    wallets = providers.Singleton(WalletService, storage, clock, keystore, asset_policy, auditor)
    address_validator = providers.Singleton(_validator, chain_plugins)
    signature_verifier = providers.Singleton(_verifier, chain_plugins)
    #: chain -> its `ChainDescription` (fee caps, wrong-password answers, `/fee`'s shape)
    descriptions = providers.Singleton(_descriptions, chain_plan)
    gateways = providers.Singleton(
        build_gateways,
        chain_plan,
        settings=settings,
        clock=clock,
        catalog=catalog,
        nonce_leases=nonce_leases.provider,  # called by the gateways that reserve nonces
    )
    wallet_reads = providers.Singleton(
        WalletReads,
        storage,
        gateways,
        asset_policy,
        page_size=settings.provided.transactions_page_size,
    )
    # the transfer lifecycle (services/transfers/): ladders, following, replacements
    transfer_settings = providers.Singleton(TransferSettings)
    transfers = providers.Singleton(
        Transfers,
        storage,
        clock,
        keystore,
        gateways,
        descriptions,
        transfer_settings,
        catalog=catalog,
    )
    # withdrawal policies: every transfer checked before a key is unsealed (docs/policies.md)
    policies = providers.Singleton(Policies, storage, clock, catalog, prices, auditor)
    sends = providers.Singleton(
        SendService, storage, clock, keystore, gateways, asset_policy, auditor, transfers, policies
    )
    # deposits found by the chains' scanners, and the event feed (docs/events.md)
    deposit_watch = providers.Singleton(
        DepositWatch,
        storage=storage,
        clock=clock,
        gateways=gateways,
        catalog=catalog,
        run_seconds=job_settings.provided.jobs_deposits_run_seconds,
        settle_batch=job_settings.provided.jobs_deposits_batch,
    )
    event_feed = providers.Singleton(
        EventFeed,
        storage,
        clock,
        retention=providers.Callable(_retention, job_settings),
    )
    # signed webhooks per api client (services/webhooks.py, docs/events.md): the sender
    # (`walletcore.webhook_senders`) is built by the delivery job's first run; secrets are
    # sealed by the keystore (the master key) when it can
    webhook_settings = providers.Singleton(WebhookSettings)
    webhook_allow_private = providers.Singleton(_allow_private_webhooks, settings, webhook_settings)
    webhook_sender = providers.Singleton(
        _webhook_sender, settings, webhook_settings, webhook_allow_private
    )
    secret_sealer = providers.Singleton(_KeystoreSealer, keystore.provider)
    webhooks = providers.Singleton(
        _webhooks,
        storage,
        clock,
        auditor,
        secret_sealer,
        webhook_sender.provider,
        settings,
        webhook_settings,
        webhook_allow_private,
        job_settings,
    )
    # readiness: the storage, each chain's node, the price age, a worker alive when one
    # runs the jobs (services/health.py)
    jobs_monitor = providers.Singleton(_jobs_monitor, jobs_mode, settings)
    health = providers.Singleton(
        HealthService,
        storage,
        gateways,
        prices,
        max_price_age_seconds=settings.provided.price_max_age_seconds,
        jobs_monitor=jobs_monitor,
    )
    # trades that move coins: the desk delivers buys and collects sells (docs/settlement.md)
    settlement_settings = providers.Singleton(SettlementSettings)
    settlements = providers.Singleton(
        _settlements,
        settlement_settings,
        storage,
        clock,
        keystore,
        gateways.provider,
        asset_policy,
        auditor,
        transfers.provider,
        sends.provider,
    )
    # the desk's accounting and its reconciliation (services/desk.py, docs/settlement.md)
    desk_settings = providers.Singleton(DeskSettings)
    desk = providers.Singleton(
        _desk,
        desk_settings,
        settlement_settings,
        storage,
        clock,
        gateways.provider,
        catalog,
        auditor,
    )
    # what a user's wallet holds on chain: sells are backed by it (services/holdings.py)
    holdings = providers.Singleton(WalletHoldings, storage, gateways)
    # the bounds of a quote's amounts per asset (`WALLETCORE_TRADE_MINIMUMS`, `_MAXIMUMS`)
    trade_limits = providers.Singleton(_trade_limits, catalog, settings)
    trading = providers.Singleton(
        TradingService,
        storage,
        clock,
        prices,
        venue,
        asset_policy,
        auditor,
        quote_ttl_seconds=settings.provided.quote_ttl_seconds,
        page_size=settings.provided.trades_page_size,
        holdings=holdings,
        limits=trade_limits,
        settlements=settlements,
    )


def create_container(settings: Settings | None = None, **overrides: Any) -> Container:
    """A container for `settings` (default: from the environment), adapters overridable by
    keyword: `create_container(storage=my_storage, clock=my_clock)`."""
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
    """Refuse settings the profile cannot run on, naming every problem at once.

    On every profile the chains' plugins and settings are chosen and checked
    (`chain_plan`). Production also refuses sandbox adapters and generated secrets, needs
    PostgreSQL, and builds the price source and venue so that their own missing settings
    (an exchange's keys, ...) are named here rather than at the first request. Raises one
    `ConfigurationError` whose `problems` has one line per setting to set or change."""
    settings: Settings = container.settings()
    production = settings.profile is Profile.PRODUCTION
    problems: list[str] = []

    def attempt(build: Any) -> None:
        try:
            build()
        except ConfigurationError as exc:
            problems.extend(exc.problems)
        except plugins.AdapterNotFound as exc:
            problems.append(str(exc))

    attempt(container.chain_plan)
    attempt(container.asset_policy)  # the asset ids of the settings, against the catalog
    attempt(container.trade_limits)
    if production:
        sandboxed = {f for f, names in SANDBOX_ONLY.items() if getattr(settings, f) in names}
        for field in sorted(sandboxed):
            problems.append(
                f"WALLETCORE_{field.upper()}={getattr(settings, field)} is a sandbox adapter; "
                f"the production profile refuses to start on it{REAL_ADAPTERS[field]}"
            )
        if settings.repo == "sql" and not _is_postgres(settings):
            problems.append(
                "WALLETCORE_DATABASE_URL must name the deployment's PostgreSQL database "
                "(postgresql+asyncpg://user:password@host:5432/walletcore); the production "
                "profile does not run on SQLite"
            )
        attempt(container.token_key)
        attempt(container.master_key)
        if "prices" not in sandboxed:  # an adapter's own settings (keys, URLs)
            attempt(container.price_feed)
            if "venue" not in sandboxed:  # the venue is built on the price source
                attempt(container.venue)
    if problems:
        unique = list(dict.fromkeys(problems))
        raise ConfigurationError(problems=unique)


#: What to set instead of a sandbox adapter on the production profile.
REAL_ADAPTERS = {
    "prices": " (set WALLETCORE_PRICES=coingecko or tickers: docs/markets.md)",
    "venue": " (set WALLETCORE_VENUE=exchange: docs/markets.md)",
    "repo": " (set WALLETCORE_REPO=sql and WALLETCORE_DATABASE_URL)",
}


def _is_postgres(settings: Settings) -> bool:
    url = settings.database_url
    return url is not None and url.get_secret_value().startswith(("postgresql", "postgres:"))


async def start(container: Container) -> None:
    """Start the adapters that have background work (price refresh, connections)."""
    check_profile(container)
    for provider in (container.storage, container.prices, container.venue):
        adapter = provider()
        if isinstance(adapter, Lifecycle):
            await adapter.start()
    for gateway in container.gateways().values():
        if isinstance(gateway, Lifecycle):
            await gateway.start()
    if container.jobs_mode() is JobsMode.INPROCESS:  # PostgreSQL: `walletcore worker` runs them
        await container.in_process_jobs().start()


async def stop(container: Container) -> None:
    if container.jobs_mode() is JobsMode.INPROCESS:
        await container.in_process_jobs().aclose()
    for gateway in container.gateways().values():
        if isinstance(gateway, Lifecycle):
            await gateway.aclose()
    for provider in (container.venue, container.prices, container.storage):
        adapter = provider()
        if isinstance(adapter, Lifecycle):
            await adapter.aclose()
    if container.jobs_mode() is not JobsMode.OFF:
        await container.jobs().aclose()  # the upstream feed, if a job built it
    if container.settings().profile is Profile.PRODUCTION:
        # check_profile built the upstream feed to check its settings, used here or not
        feed = container.price_feed()
        if isinstance(feed, Lifecycle):
            await feed.aclose()
