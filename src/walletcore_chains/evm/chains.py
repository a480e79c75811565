"""ETHEREUM, BSC and POLYGON as the family declares them (`walletcore_chains.evm.family`):
assets, `rpc` networks, default fee caps and the sandbox ledger's gas prices; each one's
`ChainDescription` is `DESCRIPTIONS[chain]`. Imports no chain library."""

from __future__ import annotations

from decimal import Decimal

from walletcore.domain.assets import CONTRACT_ASSETS, Chain
from walletcore.domain.chains import ChainDescription
from walletcore_chains.evm.config import rpc_networks
from walletcore_chains.evm.family import EvmChain


def _chain(chain: Chain, cap: Decimal, gwei: int, *, poa: bool = False) -> EvmChain:
    return EvmChain(
        chain=chain,
        assets=tuple(a for a in CONTRACT_ASSETS if a.chain == chain),
        networks=rpc_networks(chain),
        default_fee_cap=cap,
        sandbox_gas_price_wei=gwei * 10**9,
        poa=poa,
    )


ETHEREUM = _chain(Chain.ETHEREUM, Decimal("0.005"), 20)
BSC = _chain(Chain.BSC, Decimal("0.005"), 3, poa=True)
POLYGON = _chain(Chain.POLYGON, Decimal(5), 30, poa=True)
#: The plugin `evm`'s chains, in catalog order.
CHAINS: tuple[EvmChain, ...] = (ETHEREUM, BSC, POLYGON)
DESCRIPTIONS: dict[Chain, ChainDescription] = {c.chain: c.description for c in CHAINS}

__all__ = ["BSC", "CHAINS", "DESCRIPTIONS", "ETHEREUM", "POLYGON"]
