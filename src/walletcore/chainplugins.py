"""Chain plugins: each chain, or chain family, registered on its own (docs/chains.md,
"Writing a chain plugin").

A `ChainPlugin` is an object named by an entry point of the group `walletcore.chains`
(the entry point's name is the plugin's). It names the chains it serves and brings:

- for the chains it *defines* (one installed plugin defines each chain): the address
  validator, the signature verifier and the key derivation (path, curve, the address of a
  public key) the sealed KeyStore uses. A plugin that only adds a gateway for a chain
  defined elsewhere brings none of the three, and its gateways get the defining plugin's;
- gateway factories by mode (`rpc`, `devnet`, `sandbox`, ...), each building one chain's
  `ChainGateway` from a `GatewayContext`; the production profile refuses a sandbox-only
  one;
- its own settings: a pydantic-settings model (`WALLETCORE_<CHAIN>_...`), read and
  validated when the container plans the chains, and handed to its factories.

`plan_chains` picks one plugin and mode per chain: `WALLETCORE_CHAINS=<mode>` for every
chain, `WALLETCORE_CHAIN_<CHAIN>=<plugin>[:<mode>]` for one. A chain with no gateway of
the mode asked for stands on the sandbox ledger (plugin `sandbox`) on the sandbox
profile; production refuses to start. Nothing here imports a chain library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic import AliasChoices, ValidationError
from pydantic_settings import BaseSettings

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.catalog import Catalog, chain_order
from walletcore.ports import AddressValidator, ChainGateway, Clock, NonceLeases, SignatureVerifier
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings

S = TypeVar("S")
T = TypeVar("T")

#: The curves the sealed KeyStore derives and signs on: BIP32 secp256k1 keys sign a
#: 32-byte digest (`r || s || recovery id`, low-S); SLIP-0010 ed25519 keys sign the payload.
Curve = Literal["secp256k1", "ed25519"]

#: The plugin and mode that stand in, on the sandbox profile, for a chain that has no
#: gateway of the mode `WALLETCORE_CHAINS` asks for.
SANDBOX_PLUGIN = "sandbox"
SANDBOX_MODE = "sandbox"
#: Said when the sandbox chain plugin is not installed.
SANDBOX_INSTALL = "; the sandbox chain plugin comes with: pip install 'walletcore[sandbox]'"


@dataclass(frozen=True)
class KeyDerivation:
    """How a wallet's single address on a chain comes from its BIP39 seed: the key on
    `path` (BIP32 for secp256k1, SLIP-0010 for ed25519), and `address` of its public key
    (33 bytes compressed SEC1 on secp256k1, 32 bytes on ed25519)."""

    path: str
    curve: Curve
    address: Callable[[bytes], str]


@dataclass(frozen=True)
class GatewayContext(Generic[S]):
    """What a gateway factory builds one chain's gateway from."""

    chain: Chain
    #: The plugin's own settings (an instance of its `settings_model`; None without one).
    settings: S
    #: The core's settings (`WALLETCORE_HOME`, the profile, ...).
    core: Settings
    clock: Clock
    #: The served assets (the container's catalog): the chain's own are
    #: `catalog.assets_of(chain)`, its coin `catalog.native_asset(chain)`.
    catalog: Catalog
    #: The chain's, from the plugin that defines it.
    validate_address: AddressValidator
    verify_signature: SignatureVerifier
    keys: KeyDerivation
    #: The deployment's nonce leases (docs/chains.md, "Nonces"); call it only when the
    #: gateway reserves nonces: it opens the store's.
    nonce_leases: Callable[[], NonceLeases]
    #: Shared by the chains one plugin builds in one container (see `shared`).
    scope: dict[str, Any] = field(default_factory=dict, repr=False)

    def shared(self, key: str, make: Callable[[], T]) -> T:
        """One value per plugin and container: `make()` the first time `key` is asked for
        (the sandbox ledger that every chain's sandbox gateway writes to, say)."""
        if key not in self.scope:
            self.scope[key] = make()
        return cast(T, self.scope[key])


@dataclass(frozen=True)
class GatewayFactory(Generic[S]):
    """One mode of a plugin's gateways: `build(context)` -> the chain's `ChainGateway`."""

    build: Callable[[GatewayContext[S]], ChainGateway]
    #: The production profile refuses it (in-process chains, the sandbox ledger, fakes).
    sandbox_only: bool = False
    #: What the gateway needs of the plugin's settings on a chain, checked when the chains
    #: are planned (before anything is built): one sentence per problem, naming its
    #: variable (`env_name`). None: nothing beyond the model's own validation.
    needs: Callable[[Chain, S], Iterable[str]] | None = None


@dataclass(frozen=True)
class ChainPlugin(Generic[S]):
    """A chain, or chain family, and its gateways (see the module's docstring)."""

    name: str
    chains: frozenset[Chain]
    #: A pydantic-settings model, instantiated from the environment when the plugin is
    #: chosen for a chain; its instance is `GatewayContext.settings`.
    settings_model: type[S] | None = None
    #: `validate_address(chain, address)` -> the normalised address, or `InvalidRequest`.
    validate_address: AddressValidator | None = None
    #: `verify_signature(chain, address, payload, signature)` -> whether the key of
    #: `address` made it.
    verify_signature: SignatureVerifier | None = None
    #: chain -> its key derivation; for every chain in `chains` when the plugin defines them.
    keys: Mapping[Chain, KeyDerivation] = field(default_factory=dict)
    #: mode -> factory (`rpc`, `devnet`, ...); none: the chains stand on the sandbox ledger
    #: on the sandbox profile, and production refuses them.
    gateways: Mapping[str, GatewayFactory[S]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name:
            raise TypeError(f"a chain plugin's name is a plain word, not {self.name!r}")
        if not self.chains:
            raise TypeError(f"the chain plugin {self.name} names no chain")
        parts = (self.validate_address, self.verify_signature, self.keys or None)
        if any(p is not None for p in parts) and not all(p is not None for p in parts):
            raise TypeError(
                f"the chain plugin {self.name} defines its chains with validate_address, "
                "verify_signature and keys together, or brings none of them"
            )
        if self.keys and set(self.keys) != set(self.chains):
            raise TypeError(f"the chain plugin {self.name} needs keys for each of its chains")

    @property
    def defines(self) -> bool:
        """Whether it defines its chains (addresses, signatures, keys)."""
        return self.validate_address is not None


def env_names(model: type[BaseSettings], field_name: str) -> tuple[str, ...]:
    """The environment variables a settings field is read from, preferred first."""
    info = model.model_fields[field_name]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(c).upper() for c in alias.choices if isinstance(c, str))
    if isinstance(alias, str):
        return (alias.upper(),)
    prefix = str(model.model_config.get("env_prefix", ""))
    return (f"{prefix}{field_name}".upper(),)


def env_name(model: type[BaseSettings], field_name: str) -> str:
    """A settings field as messages name it: `WALLETCORE_X (or WALLETCORE_Y)`."""
    names = env_names(model, field_name)
    return names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"


def env_aliases(*names: str) -> AliasChoices:
    """`validation_alias` of a plugin setting: `WALLETCORE_` + each name, preferred first
    (a new name, then the older ones it replaces)."""
    return AliasChoices(*(f"WALLETCORE_{name}" for name in names))


class ChainDefinitions(Mapping[Chain, ChainPlugin[Any]]):
    """The plugin that defines each chain: its addresses, signatures and keys."""

    def __init__(self, by_chain: Mapping[Chain, ChainPlugin[Any]], installed: Iterable[str]):
        self._by_chain = dict(by_chain)
        self._installed = sorted(installed)

    @classmethod
    def of(cls, registry: Mapping[str, ChainPlugin[Any]]) -> ChainDefinitions:
        found: dict[Chain, list[str]] = {}
        for plugin in registry.values():
            if plugin.defines:
                for chain in plugin.chains:
                    found.setdefault(chain, []).append(plugin.name)
        clashes = [f"{c} ({', '.join(sorted(n))})" for c, n in found.items() if len(n) > 1]
        if clashes:
            raise ConfigurationError(
                f"more than one installed chain plugin defines {'; '.join(clashes)}: keep one "
                "(two definitions of a chain's addresses and keys would disagree on wallets)"
            )
        return cls({c: registry[names[0]] for c, names in found.items()}, registry)

    def __getitem__(self, chain: Chain) -> ChainPlugin[Any]:
        return self._by_chain[chain]

    def __iter__(self) -> Iterator[Chain]:
        return iter(self._by_chain)

    def __len__(self) -> int:
        return len(self._by_chain)

    def plugin_of(self, chain: Chain) -> ChainPlugin[Any]:
        plugin = self._by_chain.get(Chain(chain))
        if plugin is None:
            raise ConfigurationError(
                f"no installed chain plugin defines {chain} (its addresses, signatures and "
                f"keys); installed: {', '.join(self._installed) or 'none'} (is the matching "
                "extra installed? e.g. pip install 'walletcore[chains]')"
            )
        return plugin

    def validator(self, chain: Chain) -> AddressValidator:
        return cast(AddressValidator, self.plugin_of(chain).validate_address)

    def verifier(self, chain: Chain) -> SignatureVerifier:
        return cast(SignatureVerifier, self.plugin_of(chain).verify_signature)

    def derivation(self, chain: Chain) -> KeyDerivation:
        return self.plugin_of(chain).keys[Chain(chain)]

    def validate_address(self, chain: Chain, address: str) -> str:
        """`AddressValidator` over every chain: the defining plugin's."""
        return self.validator(chain)(Chain(chain), address)

    def verify_signature(self, chain: Chain, address: str, payload: bytes, sig: bytes) -> bool:
        """`SignatureVerifier` over every chain: the defining plugin's."""
        return self.verifier(chain)(Chain(chain), address, payload, sig)


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
        plugin_settings[name] = _read_settings(registry[name], given.get(name), problems)
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


def build_gateways(
    plan: ChainPlan,
    *,
    settings: Settings,
    clock: Clock,
    catalog: Catalog,
    nonce_leases: Callable[[], NonceLeases],
) -> dict[Chain, ChainGateway]:
    """One gateway per chain, from the chosen factories (in catalog order)."""
    scopes: dict[str, dict[str, Any]] = {}
    gateways: dict[Chain, ChainGateway] = {}
    for chain, choice in plan.choices.items():
        context: GatewayContext[Any] = GatewayContext(
            chain=chain,
            settings=plan.settings[choice.plugin.name],
            core=settings,
            clock=clock,
            catalog=catalog,
            validate_address=plan.definitions.validator(chain),
            verify_signature=plan.definitions.verifier(chain),
            keys=plan.definitions.derivation(chain),
            nonce_leases=nonce_leases,
            scope=scopes.setdefault(choice.plugin.name, {}),
        )
        gateway = choice.factory.build(context)
        built_for = getattr(gateway, "chain", chain)
        if built_for != chain:
            raise ConfigurationError(
                f"the chain plugin {choice.label} built a {built_for} gateway for {chain}"
            )
        gateways[chain] = gateway
    return gateways


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
    if sandbox is None or chain not in sandbox.chains or SANDBOX_MODE not in sandbox.gateways:
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
    if chain not in plugin.chains:
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


# -- settings ---------------------------------------------------------------------------
def _read_settings(plugin: ChainPlugin[Any], given: Any, problems: list[str]) -> Any:
    model = plugin.settings_model
    if model is None:
        return None
    if given is not None:
        if not isinstance(given, model):
            raise TypeError(
                f"the settings given for the chain plugin {plugin.name} are a "
                f"{type(given).__name__}, not its {model.__name__}"
            )
        return given
    try:
        return model()
    except ValidationError as exc:
        problems.extend(_described(plugin, exc))
        return None


def _described(plugin: ChainPlugin[Any], exc: ValidationError) -> list[str]:
    """The errors of a settings model, each naming its variable (never its value)."""
    model = plugin.settings_model
    fields: dict[str, str] = {}
    if isinstance(model, type) and issubclass(model, BaseSettings):
        for field_name in model.model_fields:
            for key in (field_name, *env_names(model, field_name)):
                fields[key.lower()] = env_name(model, field_name)
    out = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = error.get("loc") or ("",)
        where = fields.get(str(loc[0]).lower(), str(loc[0]).upper())
        out.append(f"{where}: {error['msg']} (chain plugin {plugin.name})")
    return out


def _refuse(problems: list[str]) -> None:
    if problems:
        unique = list(dict.fromkeys(problems))
        raise ConfigurationError(problems=unique)


__all__ = [
    "SANDBOX_MODE",
    "SANDBOX_PLUGIN",
    "ChainChoice",
    "ChainDefinitions",
    "ChainPlan",
    "ChainPlugin",
    "Curve",
    "GatewayContext",
    "GatewayFactory",
    "KeyDerivation",
    "build_gateways",
    "env_aliases",
    "env_name",
    "env_names",
    "plan_chains",
]
