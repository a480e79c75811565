"""Recipient address validation on any chain: `validate_address`, the validator of the
chain plugin that defines the chain (`walletcore_chains.bitcoin`, `.tron`, `.evm.plugin`,
`.solana.plugin`, or a third party's).

Each checks the encoding and its checksum, mainnet forms only, never whether the address
exists on chain; see the plugins' modules for the forms accepted.
"""

from __future__ import annotations

from typing import cast

from walletcore.domain.assets import Chain
from walletcore.plugins import chain_definitions


def validate_address(chain: Chain, address: object) -> str:
    """The address in its normalised mainnet form, or `InvalidRequest` saying what is wrong.
    Surrounding whitespace is ignored."""
    chain = Chain(chain)
    return chain_definitions().validator(chain)(chain, cast(str, address))


__all__ = ["validate_address"]
