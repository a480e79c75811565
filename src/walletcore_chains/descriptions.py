"""The descriptions of the chains walletcore_chains' plugins define, in catalog order:
chain -> `ChainDescription` (each declared in its plugin's package: `bitcoin/chain.py`,
`evm/chains.py`, `tron/chain.py`, `solana/chain.py`). A deployment reads them from its
installed plugins (the container's `descriptions`); this table is for tools and tests."""

from __future__ import annotations

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.chains import ChainDescription
from walletcore_chains.bitcoin import chain as bitcoin
from walletcore_chains.evm import chains as evm
from walletcore_chains.solana import chain as solana
from walletcore_chains.tron import chain as tron

_ALL = {
    d.chain: d
    for d in (bitcoin.DESCRIPTION, *evm.DESCRIPTIONS.values(), tron.DESCRIPTION, solana.DESCRIPTION)
}
DESCRIPTIONS: dict[Chain, ChainDescription] = {chain: _ALL[chain] for chain in CONTRACT_CHAINS}

__all__ = ["DESCRIPTIONS"]
