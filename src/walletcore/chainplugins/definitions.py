"""The plugin that defines each chain: its addresses, signatures, keys and description."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from walletcore.chainplugins.plugin import ChainPlugin, KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.chains import ChainDescription
from walletcore.ports import AddressValidator, SignatureVerifier
from walletcore.secretfiles import ConfigurationError


class ChainDefinitions(Mapping[Chain, ChainPlugin[Any]]):
    """The plugin that defines each chain: its addresses, signatures, keys and
    description."""

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

    def description(self, chain: Chain) -> ChainDescription:
        return self.plugin_of(chain).describes[Chain(chain)]

    @property
    def descriptions(self) -> dict[Chain, ChainDescription]:
        """Every defined chain's description."""
        return {chain: plugin.describes[chain] for chain, plugin in self._by_chain.items()}

    def validate_address(self, chain: Chain, address: str) -> str:
        """`AddressValidator` over every chain: the defining plugin's."""
        return self.validator(chain)(Chain(chain), address)

    def verify_signature(self, chain: Chain, address: str, payload: bytes, sig: bytes) -> bool:
        """`SignatureVerifier` over every chain: the defining plugin's."""
        return self.verifier(chain)(Chain(chain), address, payload, sig)


__all__ = ["ChainDefinitions"]
