"""The choice of each chain's gateway: `plan_chains` picks one plugin and mode per chain.

`WALLETCORE_CHAINS=<mode>` for every chain, `WALLETCORE_CHAIN_<CHAIN>=<plugin>[:<mode>]` for
one. A chain with no gateway of the mode asked for stands on the sandbox ledger (plugin
`sandbox`) on the sandbox profile; production refuses to start, as it refuses a sandbox-only
gateway. The chains planned are the contract's six and each chain another installed plugin
defines that the deployment names (`served_chains`); the sandbox ledger may be named for
any of them. Every problem of one kind is told in one `ConfigurationError`, naming the
variables to change. Nothing here imports a chain library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from walletcore.chainplugins.definitions import ChainDefinitions
from walletcore.chainplugins.plugin import ChainPlugin, GatewayFactory
from walletcore.chainplugins.reading import read_settings
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.catalog import chain_order
from walletcore.domain.chains import ChainDescription
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings

#: The plugin and mode that stand in, on the sandbox profile, for a chain that has no
#: gateway of the mode `WALLETCORE_CHAINS` asks for.
SANDBOX_PLUGIN = "sandbox"
SANDBOX_MODE = "sandbox"
#: Said when the sandbox chain plugin is not installed.
SANDBOX_INSTALL = "; the sandbox chain plugin comes with: pip install 'walletcore[sandbox]'"


@dataclass(frozen=True)
class ChainChoice:
    """The plugin and mode of one chain's gateway."""

    chain: Chain
    plugin: ChainPlugin[Any]
    mode: str
    #: How it was chosen, for messages: `WALLETCORE_CHAINS=rpc`, `WALLETCORE_CHAIN_SOLANA=x`.
    source: str
    #: The sandbox ledger stands in: the chain has no gateway of the mode asked for.
    stand_in: bool = False

    @property
    def factory(self) -> GatewayFactory[Any]:
        return self.plugin.gateways[self.mode]

    @property
    def label(self) -> str:
        return f"{self.plugin.name}:{self.mode}"


@dataclass(frozen=True)
class ChainPlan:
    """Every chain's choice, the plugins' settings, and the chains' definitions."""

    choices: Mapping[Chain, ChainChoice]
    definitions: ChainDefinitions
    #: plugin name -> its settings instance (None without a model), for the chosen plugins
    settings: Mapping[str, Any]

    @property
    def descriptions(self) -> dict[Chain, ChainDescription]:
        """The served chains' descriptions (in catalog order), from their defining plugins:
        an installed chain the deployment does not serve is not among them."""
        return {chain: self.definitions.description(chain) for chain in self.choices}


def plan_chains(
    settings: Settings,
    registry: Mapping[str, ChainPlugin[Any]],
    chain_settings: Mapping[str, Any] | None = None,
) -> ChainPlan:
    """Choose each chain's plugin and mode, and read the chosen plugins' settings.

    `chain_settings`: plugin name -> a settings instance to use instead of reading the
    environment (tests, embedding). Every problem of one kind is told in one
    `ConfigurationError`, naming the variables to change.
    """
    definitions = ChainDefinitions.of(registry)
    missing = [c for c in CONTRACT_CHAINS if c not in definitions]
    if missing:
        definitions.plugin_of(missing[0])  # raises, naming what is installed
    problems: list[str] = []
    choices: dict[Chain, ChainChoice] = {}
    for chain in served_chains(settings, definitions, problems):
        choice = _choose(chain, settings, registry, problems)
        if choice is not None:
            choices[chain] = choice
    _refuse(problems)
    production = settings.profile is Profile.PRODUCTION
    if production:
        problems.extend(_production_problems(choices.values()))
        _refuse(problems)
    plugin_settings: dict[str, Any] = {}
    given = chain_settings or {}
    for name in dict.fromkeys(c.plugin.name for c in choices.values()):
        plugin_settings[name] = read_settings(registry[name], given.get(name), problems)
    _refuse(problems)
    for choice in choices.values():
        needs = choice.factory.needs
        if needs is not None:
            problems.extend(needs(choice.chain, plugin_settings[choice.plugin.name]))
    _refuse(problems)
    return ChainPlan(choices, definitions, plugin_settings)


def served_chains(
    settings: Settings, definitions: ChainDefinitions, problems: list[str]
) -> list[Chain]:
    """The chains a deployment serves, in catalog order: the contract's six, and each other
    chain the operator names (`WALLETCORE_CHAIN_<CHAIN>`) that an installed plugin defines;
    a named chain no installed plugin defines is a problem."""
    served = list(CONTRACT_CHAINS)
    for chain in sorted(settings.gateways, key=chain_order):
        if chain in served:
            continue
        if chain not in definitions:
            known = ", ".join(c.value for c in sorted(definitions, key=chain_order))
            problems.append(
                f"WALLETCORE_CHAIN_{chain.value}={settings.gateways[chain]}: no installed "
                f"chain plugin defines {chain}; chains: {known}"
            )
            continue
        served.append(chain)
    return served


# -- choosing ---------------------------------------------------------------------------
def _choose(
    chain: Chain,
    settings: Settings,
    registry: Mapping[str, ChainPlugin[Any]],
    problems: list[str],
) -> ChainChoice | None:
    spec = settings.gateways.get(chain)
    if spec:
        return _chosen(chain, spec, settings, registry, problems)
    mode = settings.chains
    source = f"WALLETCORE_CHAINS={mode}"
    offering = [p for p in registry.values() if chain in p.chains and mode in p.gateways]
    if len(offering) > 1:
        names = ", ".join(sorted(p.name for p in offering))
        problems.append(
            f"{source}: the chain plugins {names} all have a {mode} gateway for {chain}; "
            f"choose one with WALLETCORE_CHAIN_{chain.value}=<plugin>"
        )
        return None
    if offering:
        return ChainChoice(chain, offering[0], mode, source)
    if not any(mode in p.gateways for p in registry.values()):
        modes = sorted({m for p in registry.values() for m in p.gateways})
        hint = SANDBOX_INSTALL if mode == SANDBOX_MODE and SANDBOX_PLUGIN not in registry else ""
        problems.append(
            f"{source}: no installed chain plugin has a {mode} gateway (modes: "
            f"{', '.join(modes) or 'none'}){hint}"
        )
        return None
    sandbox = registry.get(SANDBOX_PLUGIN)
    if sandbox is None or not _serves(sandbox, chain):
        hint = SANDBOX_INSTALL if sandbox is None else ""
        problems.append(f"{source}: {chain} has no {mode} gateway, and no sandbox ledger{hint}")
        return None
    return ChainChoice(chain, sandbox, SANDBOX_MODE, source, stand_in=True)


def _chosen(
    chain: Chain,
    spec: str,
    settings: Settings,
    registry: Mapping[str, ChainPlugin[Any]],
    problems: list[str],
) -> ChainChoice | None:
    source = f"WALLETCORE_CHAIN_{chain.value}={spec}"
    name, _, mode = (part.strip() for part in spec.partition(":"))
    plugin = registry.get(name)
    if plugin is None and not mode:  # a bare mode: `WALLETCORE_CHAIN_SOLANA=devnet`
        offering = [p for p in registry.values() if chain in p.chains and name in p.gateways]
        if len(offering) == 1:
            plugin, mode = offering[0], name
        elif offering:
            names = ", ".join(sorted(p.name for p in offering))
            problems.append(
                f"{source}: the chain plugins {names} all have a {name} gateway for {chain}; "
                f"name one: <plugin>:{name}"
            )
            return None
    if plugin is None:
        problems.append(
            f"{source}: no chain plugin {name!r} with a gateway for {chain}; installed: "
            f"{', '.join(sorted(registry)) or 'none'}"
        )
        return None
    if not _serves(plugin, chain):
        served = ", ".join(c.value for c in sorted(plugin.chains, key=chain_order))
        problems.append(f"{source}: the chain plugin {name} serves {served}, not {chain}")
        return None
    if not mode:
        if len(plugin.gateways) == 1:
            mode = next(iter(plugin.gateways))
        elif settings.chains in plugin.gateways:
            mode = settings.chains
    if mode not in plugin.gateways:
        modes = ", ".join(f"{name}:{m}" for m in sorted(plugin.gateways)) or "none"
        problems.append(f"{source}: name one of the plugin's gateways: {modes}")
        return None
    return ChainChoice(chain, plugin, mode, source)


def _serves(plugin: ChainPlugin[Any], chain: Chain) -> bool:
    """Whether `plugin` has gateways for `chain` (a chain some installed plugin defines):
    the chains it names, and, for the sandbox ledger, any chain: it plays a chain by the
    defining plugin's description (`SandboxRules`), so a chain a plugin adds stands on it
    when named (`WALLETCORE_CHAIN_<CHAIN>=sandbox`)."""
    if chain in plugin.chains:
        return True
    return plugin.name == SANDBOX_PLUGIN and SANDBOX_MODE in plugin.gateways


def _production_problems(choices: Iterable[ChainChoice]) -> list[str]:
    stand_ins: dict[str, list[str]] = {}
    sandboxed: dict[str, dict[str, list[str]]] = {}
    for choice in choices:
        if choice.stand_in:
            stand_ins.setdefault(choice.source, []).append(choice.chain.value)
        elif choice.factory.sandbox_only:
            by_label = sandboxed.setdefault(choice.source, {})
            by_label.setdefault(choice.label, []).append(choice.chain.value)
    problems = [
        f"{source} has no production gateway for {', '.join(chains)} yet; the production "
        "profile refuses to start on it"
        for source, chains in stand_ins.items()
    ]
    for source, by_label in sandboxed.items():
        which = "; ".join(f"{label}: {', '.join(chains)}" for label, chains in by_label.items())
        problems.append(
            f"{source} is a sandbox adapter ({which}); the production profile refuses to "
            "start on it (set WALLETCORE_CHAINS=rpc and each chain's node: docs/deploy.md)"
        )
    return problems


def _refuse(problems: list[str]) -> None:
    if problems:
        unique = list(dict.fromkeys(problems))
        raise ConfigurationError(problems=unique)


__all__ = [
    "SANDBOX_INSTALL",
    "SANDBOX_MODE",
    "SANDBOX_PLUGIN",
    "ChainChoice",
    "ChainPlan",
    "plan_chains",
    "served_chains",
]
