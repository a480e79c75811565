"""Adapter discovery through entry points, so a third-party package can add one.

Groups: `walletcore.repos`, `walletcore.price_sources`, `walletcore.venues`,
`walletcore.keystores`, `walletcore.job_monitors` (by jobs engine: a readiness check that
another process runs the jobs), `walletcore.webhook_senders` (what posts the signed
webhooks, built with `allow_private=`): an entry point names a factory called with keyword arguments
(`settings=`, `clock=`, and whatever else the group passes); factories take `**_` so new
arguments can be added without breaking them.

`walletcore.chains` names objects, not factories: one `ChainPlugin` per chain or chain
family (`walletcore.chainplugins`), each bringing its settings, address validator,
signature verifier, key derivation and gateway factories (`chain_plugins`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from walletcore.chainplugins import ChainDefinitions, ChainPlugin
from walletcore.secretfiles import ConfigurationError

CHAINS = "walletcore.chains"
JOB_MONITORS = "walletcore.job_monitors"
WEBHOOK_SENDERS = "walletcore.webhook_senders"

GROUPS = (
    "walletcore.repos",
    "walletcore.price_sources",
    "walletcore.venues",
    "walletcore.keystores",
    "walletcore.nonce_leases",
    JOB_MONITORS,
    WEBHOOK_SENDERS,
    CHAINS,
)

#: The core's own adapters (the fakes of `walletcore.testing`), used when the distribution's
#: metadata is not installed (running from a source tree on PYTHONPATH). Every other
#: adapter is found through its entry point only.
_BUILTIN: dict[tuple[str, str], str] = {
    ("walletcore.repos", "memory"): "walletcore.testing.storage:build",
    ("walletcore.nonce_leases", "memory"): "walletcore.testing.nonces:build",
}

#: The extra of this distribution that installs each of its adapters, named when one is
#: missing: `pip install 'walletcore[<extra>]'`.
EXTRAS: dict[tuple[str, str], str] = {
    ("walletcore.repos", "sql"): "sql",
    ("walletcore.nonce_leases", "sql"): "sql",
    ("walletcore.price_sources", "sandbox"): "sandbox",
    ("walletcore.venues", "sandbox"): "sandbox",
    ("walletcore.price_sources", "coingecko"): "markets",
    ("walletcore.price_sources", "tickers"): "markets",
    ("walletcore.venues", "exchange"): "markets",
    ("walletcore.keystores", "sealed"): "chains",
    (JOB_MONITORS, "procrastinate"): "jobs",
    (WEBHOOK_SENDERS, "httpx"): "webhooks",
    (CHAINS, "sandbox"): "sandbox",
    (CHAINS, "evm"): "chains",
    (CHAINS, "solana"): "chains",
    (CHAINS, "bitcoin"): "chains",
    (CHAINS, "tron"): "chains",
}


class AdapterNotFound(LookupError):
    """No adapter of that name, or one whose libraries are missing (`cause`)."""

    def __init__(
        self, group: str, name: str, available: list[str], cause: ImportError | None = None
    ) -> None:
        extra = EXTRAS.get((group, name))
        install = (
            f"'walletcore[{extra}]'" if extra else "the matching extra, e.g. 'walletcore[all]'"
        )
        if cause is None:
            found = f"no adapter {name!r} in {group}; installed: {', '.join(available) or 'none'}"
        else:
            found = f"the adapter {name!r} of {group} cannot be loaded ({cause})"
        super().__init__(f"{found}; install it with: pip install {install}")


def available(group: str) -> list[str]:
    names = {ep.name for ep in entry_points(group=group)}
    names.update(n for g, n in _BUILTIN if g == group)
    return sorted(names)


def load_object(group: str, name: str) -> object:
    """What the entry point `name` of `group` names (a factory, a plugin object)."""
    for ep in entry_points(group=group):
        if ep.name == name:
            try:
                found: object = ep.load()
            except ImportError as exc:  # an extra's library is not installed
                raise AdapterNotFound(group, name, available(group), cause=exc) from exc
            return found
    target = _BUILTIN.get((group, name))
    if target is None:
        raise AdapterNotFound(group, name, available(group))
    module, _, attr = target.partition(":")
    found = getattr(import_module(module), attr)
    return found


def load(group: str, name: str) -> Callable[..., Any]:
    factory = load_object(group, name)
    if not callable(factory):
        raise TypeError(f"the entry point {name} of {group} names no factory")
    return factory


def build(group: str, name: str, **kwargs: Any) -> Any:
    """Load the factory `name` of `group` and call it with `kwargs`."""
    return load(group, name)(**kwargs)


@functools.cache
def chain_plugins() -> Mapping[str, ChainPlugin[Any]]:
    """Every installed chain plugin, by name (loaded once per process)."""
    found: dict[str, ChainPlugin[Any]] = {}
    for name in available(CHAINS):
        plugin = load_object(CHAINS, name)
        if not isinstance(plugin, ChainPlugin):
            raise ConfigurationError(
                f"the entry point {name} of {CHAINS} names a {type(plugin).__name__}, not a "
                "walletcore.chainplugins.ChainPlugin (docs/chains.md, writing a chain plugin)"
            )
        if plugin.name != name:
            raise ConfigurationError(
                f"the entry point {name} of {CHAINS} names the chain plugin {plugin.name}"
            )
        found[name] = plugin
    return MappingProxyType(found)


@functools.cache
def chain_definitions() -> ChainDefinitions:
    """The installed plugin that defines each chain (addresses, signatures, keys)."""
    return ChainDefinitions.of(chain_plugins())
