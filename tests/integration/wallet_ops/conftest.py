"""Fixtures of the wallet operation tests (helpers live in ops_support.py)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("ops_support")

from ops_support import Ops, make_ops

from walletcore.clock import ManualClock
from walletcore.settings import Settings


@pytest.fixture
def ops(settings: Settings, clock: ManualClock) -> Ops:
    return make_ops(settings, clock)
