"""Fixtures of the first-hour tests (a new user's first commands)."""

from __future__ import annotations

from types import ModuleType

import pytest
from first_hour_helpers import load_dev


@pytest.fixture
def dev() -> ModuleType:
    return load_dev()
