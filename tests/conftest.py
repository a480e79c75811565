"""Fixtures shared by every test suite: a manual clock, sandbox settings, a user factory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.clients import User
from walletcore.domain.ids import new_id
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import Clock, Storage
from walletcore.settings import Settings

#: Half a minute past the hour, so "the next minute" is 30 s away and a quote (60 s) is
#: still live there.
START = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Sandbox settings on the in-memory storage (the default storage is `sql`)."""
    return Settings(home=tmp_path / "home", repo="memory")


async def add_user(storage: Storage, clock: Clock, client_id: str) -> str:
    """Store a user and an empty wallet record directly (the wallet service is not needed)."""
    user_id = new_id()
    now = clock.now()
    async with storage.write() as unit:
        await unit.wallets.add_user(
            User(user_id=user_id, client_id=client_id, created_at=now),
            WalletRecord(
                client_id=client_id,
                owner=WalletOwner.USER,
                user_id=user_id,
                sealed=b"",
                addresses={},
                created_at=now,
            ),
        )
    return user_id


@pytest.fixture
def make_user() -> Callable[[Storage, Clock, str], Awaitable[str]]:
    """`await make_user(storage, clock, client_id)` -> the new user's id."""
    return add_user


# -- chain libraries ---------------------------------------------------------------------
# bitcoinlib writes a config, a log and a database directory where BCL_DATA_DIR points when
# it is first imported (unset: ~/.bitcoinlib). Pin it to a temporary folder before any test
# module can import it.
def _pin_bitcoinlib_data_dir() -> None:
    import atexit
    import os
    import shutil
    import tempfile

    if not os.environ.get("BCL_DATA_DIR"):
        folder = tempfile.mkdtemp(prefix="walletcore-tests-bitcoinlib-")
        os.environ["BCL_DATA_DIR"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


_pin_bitcoinlib_data_dir()


# -- WALLETCORE_HOME ----------------------------------------------------------------------
# The default home is the user's data folder (~/.local/share/walletcore): a test that
# builds settings from the environment must never write there, so the whole run gets a
# throwaway home unless one is set (xdist workers inherit the controller's).
_created_home: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    import os
    import tempfile

    global _created_home
    if not os.environ.get("WALLETCORE_HOME"):
        _created_home = os.environ["WALLETCORE_HOME"] = tempfile.mkdtemp(prefix="wc-test-home-")
    # A test's container is a whole deployment in one process: its background jobs run in
    # it (on PostgreSQL a deployment would run `walletcore worker`, which no test of another
    # feature starts). The jobs' own tests and the production smoke test choose their mode.
    os.environ.setdefault("WALLETCORE_JOBS", "inprocess")


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    if _created_home is not None:
        shutil.rmtree(_created_home, ignore_errors=True)
