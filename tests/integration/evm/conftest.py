"""Fixtures of the EVM gateway tests: one in-process py-evm chain (eth-tester) per module,
with the asset table's tokens deployed from Token.vy."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("evm_support")

from walletcore.domain.assets import Chain
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.devnet import DevnetEvmGateway


@pytest.fixture(scope="module")
def chain() -> DevnetEvmGateway:
    return DevnetEvmGateway(Chain.ETHEREUM, validate_address)
