"""The contract's catalog, for fakes and tests: the sixteen assets of the six chains
(`walletcore.domain.assets.CONTRACT_ASSETS`), in contract order. A deployment's catalog is
its container's (`Container.catalog`); the fakes default to this one."""

from __future__ import annotations

from walletcore.domain.assets import CONTRACT_ASSETS
from walletcore.domain.catalog import Catalog

CONTRACT_CATALOG = Catalog.of(CONTRACT_ASSETS)

__all__ = ["CONTRACT_CATALOG"]
