"""Adapter discovery through entry points, so a third-party package can add one.

Groups: `walletcore.repos`, `walletcore.price_sources`, `walletcore.venues`,
`walletcore.keystores`, `walletcore.chains`. An entry point names a factory called with
keyword arguments (`settings=`, `clock=`, and whatever else the group passes); factories
take `**_` so new arguments can be added without breaking them. `walletcore.chains`
factories answer one `ChainGateway` per chain (a mapping).

Two groups name plain functions rather than factories (`load` them, do not `build`):
`walletcore.address_validators` (`validate(chain, address) -> str`) and
`walletcore.signature_verifiers` (`verify(chain, address, payload, signature) -> bool`);
the sandbox chains use them, since the core cannot import the chain libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

GROUPS = (
    "walletcore.repos",
    "walletcore.price_sources",
    "walletcore.venues",
    "walletcore.keystores",
    "walletcore.chains",
    "walletcore.address_validators",
    "walletcore.signature_verifiers",
)

#: The core's own adapters, used when the distribution's metadata is not installed
#: (running from a source tree on PYTHONPATH).
_BUILTIN: dict[tuple[str, str], str] = {
    ("walletcore.repos", "memory"): "walletcore.sandbox.repo:build",
    ("walletcore.price_sources", "sandbox"): "walletcore.sandbox.prices:build",
    ("walletcore.venues", "sandbox"): "walletcore.sandbox.venue:build",
    ("walletcore.chains", "sandbox"): "walletcore.sandbox.chain:build",
}


class AdapterNotFound(LookupError):
    def __init__(self, group: str, name: str, available: list[str]) -> None:
        super().__init__(
            f"no adapter {name!r} in {group}; installed: {', '.join(available) or 'none'}"
            " (is the matching extra installed? e.g. pip install 'walletcore[all]')"
        )


def available(group: str) -> list[str]:
    names = {ep.name for ep in entry_points(group=group)}
    names.update(n for g, n in _BUILTIN if g == group)
    return sorted(names)


def load(group: str, name: str) -> Callable[..., Any]:
    for ep in entry_points(group=group):
        if ep.name == name:
            factory: Callable[..., Any] = ep.load()
            return factory
    target = _BUILTIN.get((group, name))
    if target is None:
        raise AdapterNotFound(group, name, available(group))
    module, _, attr = target.partition(":")
    factory = getattr(import_module(module), attr)
    return factory


def build(group: str, name: str, **kwargs: Any) -> Any:
    """Load the factory `name` of `group` and call it with `kwargs`."""
    return load(group, name)(**kwargs)
