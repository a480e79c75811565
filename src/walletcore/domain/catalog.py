"""The catalog: the assets a deployment serves, in the order the contract lists them.

One `Catalog` per container (`Container.catalog`), built from the served chains' assets:
the contract's six chains first, in contract order (`CONTRACT_CHAINS`), then any other
chain by name; within a chain, its assets in the order its plugin declares them (the
native coin first in the contract's). Services, adapters and the binding are handed it;
nothing looks an asset up in a module-level table, so an asset a chain plugin adds
resolves wherever the contract's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from walletcore.domain.assets import CONTRACT_CHAINS, Asset, Chain
from walletcore.domain.errors import UnknownAsset

_CONTRACT_ORDER = {chain: place for place, chain in enumerate(CONTRACT_CHAINS)}


def chain_order(chain: Chain) -> tuple[int, str]:
    """The sort key of catalog order: the contract's chains first, in contract order, then
    the others by name."""
    return (_CONTRACT_ORDER.get(chain, len(_CONTRACT_ORDER)), chain.value)


class Catalog:
    """The served assets, in order, and the lookups every layer makes on them.

    Built from (chain, assets) groups (`Catalog({Chain.BITCOIN: (btc,), ...})`), or from
    a flat list grouped by each asset's chain (`Catalog.of(assets)`). Refused
    (`ValueError`): two assets with one id, a chain without exactly one native asset, an
    asset filed under a chain that is not its own.
    """

    __slots__ = ("_assets", "_by_id", "_chains", "_ids", "_max_decimals", "_natives", "_symbols")

    def __init__(
        self,
        groups: Mapping[Chain, Iterable[Asset]] | Iterable[tuple[Chain, Iterable[Asset]]],
    ) -> None:
        items = groups.items() if isinstance(groups, Mapping) else groups
        by_chain: dict[Chain, tuple[Asset, ...]] = {}
        for name, assets in items:
            chain = Chain(name)
            if chain in by_chain:
                raise ValueError(f"the catalog names the chain {chain} twice")
            by_chain[chain] = tuple(assets)
        natives: dict[Chain, Asset] = {}
        by_id: dict[int, Asset] = {}
        ordered: list[Asset] = []
        for chain in sorted(by_chain, key=chain_order):
            group = by_chain[chain]
            for asset in group:
                if asset.chain != chain:
                    raise ValueError(
                        f"asset {asset.id} ({asset.symbol}) is on {asset.chain}, not {chain}"
                    )
                if asset.id in by_id:
                    raise ValueError(f"two assets have the id {asset.id}")
                by_id[asset.id] = asset
            native = [a for a in group if a.is_native]
            if len(native) != 1:
                raise ValueError(
                    f"the chain {chain} needs exactly one native asset, not {len(native)}"
                )
            natives[chain] = native[0]
            ordered.extend(group)
        self._assets = tuple(ordered)
        self._by_id = MappingProxyType(by_id)
        self._chains = tuple(natives)
        self._natives = MappingProxyType(natives)
        self._ids = tuple(a.id for a in ordered)
        self._symbols = tuple(sorted({a.symbol for a in ordered}))
        self._max_decimals = max((a.decimals for a in ordered), default=0)

    @classmethod
    def of(cls, assets: Iterable[Asset]) -> Catalog:
        """The catalog of `assets`, grouped by their chains (in the order given within one)."""
        groups: dict[Chain, list[Asset]] = {}
        for asset in assets:
            groups.setdefault(asset.chain, []).append(asset)
        return cls(groups)

    @property
    def assets(self) -> tuple[Asset, ...]:
        """Every served asset, in catalog order (the order `/config` lists them in)."""
        return self._assets

    @property
    def chains(self) -> tuple[Chain, ...]:
        """The served chains, in catalog order."""
        return self._chains

    @property
    def asset_ids(self) -> tuple[int, ...]:
        """The ids of `assets`, in catalog order."""
        return self._ids

    @property
    def symbols(self) -> tuple[str, ...]:
        """The coin symbols (each once), sorted: the keys of the `/prices` map."""
        return self._symbols

    @property
    def max_decimals(self) -> int:
        """The most decimal places any served asset has."""
        return self._max_decimals

    def asset_by_id(self, asset_id: int) -> Asset:
        """The asset of `asset_id`; `UnknownAsset` (400 Unknown assetId) when none is served."""
        try:
            return self._by_id[asset_id]
        except KeyError:
            raise UnknownAsset() from None

    def get(self, asset_id: int) -> Asset | None:
        """The asset of `asset_id`, or None."""
        return self._by_id.get(asset_id)

    def __contains__(self, asset_id: object) -> bool:
        """Whether an asset of this id is served."""
        return asset_id in self._by_id

    def native_asset(self, chain: Chain) -> Asset:
        """The chain's own coin; `KeyError` for a chain not served."""
        return self._natives[chain]

    def has_chain(self, chain: Chain) -> bool:
        return chain in self._natives

    def assets_of(self, chain: Chain) -> tuple[Asset, ...]:
        """The chain's assets, in catalog order (none for a chain not served)."""
        return tuple(a for a in self._assets if a.chain == chain)

    def for_chains(self, chains: Iterable[Chain]) -> Catalog:
        """The catalog of these chains only (those of them it serves), in its order."""
        wanted = set(chains)
        return Catalog((c, self.assets_of(c)) for c in self._chains if c in wanted)

    def __len__(self) -> int:
        return len(self._assets)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Catalog) and self._assets == other._assets

    def __hash__(self) -> int:
        return hash(self._assets)

    def __repr__(self) -> str:
        return f"Catalog({', '.join(c.value for c in self._chains)}: {len(self._assets)} assets)"


__all__ = ["Catalog", "chain_order"]
