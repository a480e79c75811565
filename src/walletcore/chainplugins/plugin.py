"""The public API of a chain plugin: what a plugin declares (`ChainPlugin`), what its
gateway factories are given (`GatewayContext`) and how a wallet's keys are derived on its
chains (`KeyDerivation`). docs/chains.md, "Writing a chain plugin"."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.chains import ChainDescription
from walletcore.ports import AddressValidator, ChainGateway, Clock, NonceLeases, SignatureVerifier
from walletcore.settings import Settings

S = TypeVar("S")
T = TypeVar("T")

#: The curves the sealed KeyStore derives and signs on: BIP32 secp256k1 keys sign a
#: 32-byte digest (`r || s || recovery id`, low-S); SLIP-0010 ed25519 keys sign the payload.
Curve = Literal["secp256k1", "ed25519"]


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
    #: The chain's description, from the plugin that defines it.
    description: ChainDescription
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
    """A chain, or chain family, and its gateways.

    An object named by an entry point of the group `walletcore.chains` (the entry point's
    name is the plugin's). It names the chains it serves and brings:

    - for the chains it *defines* (one installed plugin defines each chain): the address
      validator, the signature verifier, the key derivation (path, curve, the address of a
      public key) the sealed KeyStore uses, and the chain's `ChainDescription`. A plugin
      that only adds a gateway for a chain defined elsewhere brings none of the four, and
      its gateways get the defining plugin's;
    - gateway factories by mode (`rpc`, `devnet`, `sandbox`, ...), each building one
      chain's `ChainGateway` from a `GatewayContext`; the production profile refuses a
      sandbox-only one;
    - its own settings: a pydantic-settings model (`WALLETCORE_<CHAIN>_...`), read and
      validated when the container plans the chains, and handed to its factories.
    """

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
    #: chain -> its description; for every chain in `chains` when the plugin defines them.
    describes: Mapping[Chain, ChainDescription] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name:
            raise TypeError(f"a chain plugin's name is a plain word, not {self.name!r}")
        if not self.chains:
            raise TypeError(f"the chain plugin {self.name} names no chain")
        parts = (
            self.validate_address,
            self.verify_signature,
            self.keys or None,
            self.describes or None,
        )
        if any(p is not None for p in parts) and not all(p is not None for p in parts):
            raise TypeError(
                f"the chain plugin {self.name} defines its chains with validate_address, "
                "verify_signature, keys and describes together, or brings none of them"
            )
        if self.keys and set(self.keys) != set(self.chains):
            raise TypeError(f"the chain plugin {self.name} needs keys for each of its chains")
        if self.describes and set(self.describes) != set(self.chains):
            raise TypeError(
                f"the chain plugin {self.name} needs a description of each of its chains"
            )
        wrong = [c for c, d in self.describes.items() if d.chain != c]
        if wrong:
            raise TypeError(
                f"the chain plugin {self.name} describes {', '.join(map(str, wrong))} with "
                "another chain's description"
            )

    @property
    def defines(self) -> bool:
        """Whether it defines its chains (addresses, signatures, keys, description)."""
        return self.validate_address is not None


__all__ = [
    "ChainPlugin",
    "Curve",
    "GatewayContext",
    "GatewayFactory",
    "KeyDerivation",
]
