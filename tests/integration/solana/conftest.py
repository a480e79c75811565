"""Fixtures of the Solana gateway tests: one LiteSVM runtime per module, with the SPL
mints of the asset table."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("sol_support")

from walletcore_chains.addresses import validate_address
from walletcore_chains.solana.devnet import DevnetSolanaGateway


@pytest.fixture(scope="module")
def chain() -> DevnetSolanaGateway:
    return DevnetSolanaGateway(validate_address)
