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
