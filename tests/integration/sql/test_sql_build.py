"""The entry point `walletcore.repos: sql` (and its `walletcore.nonce_leases: sql`): URL
from settings, sandbox migrates itself, production checks and needs an explicit URL, first
use without start() is safe."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest
from pydantic import SecretStr

from walletcore.clock import SystemClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.ports import Lifecycle
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore.testing import autocommit
from walletcore_sql import migrate
from walletcore_sql.errors import SchemaNotMigrated
from walletcore_sql.storage import SqlStorage, build

ROOT = Path(__file__).resolve().parents[3]


def test_the_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["walletcore.repos"]["sql"]
    assert target == "walletcore_sql.storage:build"
    module, _, attr = target.partition(":")
    assert getattr(__import__(module, fromlist=[attr]), attr) is build
    leases = project["project"]["entry-points"]["walletcore.nonce_leases"]["sql"]
    assert leases == "walletcore_sql.nonces:build"


async def test_the_sandbox_default_is_a_sqlite_file_under_home(settings: Settings) -> None:
    storage = build(settings=settings, clock=SystemClock())
    assert isinstance(storage, SqlStorage) and isinstance(storage, Lifecycle)
    try:
        await storage.start()
        assert (settings.home / "walletcore.db").is_file()
        url = migrate.settings_url(settings)
        assert url.startswith("sqlite+aiosqlite:///") and url.endswith("/walletcore.db")
        assert await migrate.current_async(url) == migrate.head()
    finally:
        await storage.aclose()


async def test_first_use_without_start_migrates_the_sandbox(settings: Settings) -> None:
    storage = build(settings=settings, clock=SystemClock())
    client = ApiClient(client_id=new_id(), name="lazy", key_hash="00" * 32)
    try:
        await asyncio.gather(
            autocommit(storage).clients.add(client), autocommit(storage).audit.newest()
        )
        assert await autocommit(storage).clients.get(client.client_id) == client
    finally:
        await storage.aclose()


def test_each_event_loop_gets_its_own_engine(settings: Settings) -> None:
    """A CLI may run one asyncio.run per command against the same storage object."""
    storage = build(settings=settings, clock=SystemClock())
    client = ApiClient(client_id=new_id(), name="cli", key_hash="00" * 32)
    asyncio.run(autocommit(storage).clients.add(client))
    assert asyncio.run(autocommit(storage).clients.get(client.client_id)) == client
    asyncio.run(storage.aclose())


def test_production_needs_an_explicit_database_url(tmp_path: Path) -> None:
    settings = Settings(profile=Profile.PRODUCTION, home=tmp_path)
    with pytest.raises(ConfigurationError, match="WALLETCORE_DATABASE_URL"):
        build(settings=settings, clock=SystemClock())


async def test_production_checks_the_schema_and_does_not_migrate(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'prod.db'}"
    settings = Settings(profile=Profile.PRODUCTION, home=tmp_path, database_url=SecretStr(url))
    storage = build(settings=settings, clock=SystemClock())
    with pytest.raises(SchemaNotMigrated, match="walletcore db upgrade"):
        await storage.start()
    with pytest.raises(SchemaNotMigrated):  # lazily, too
        await autocommit(storage).clients.get(new_id())
    await storage.aclose()
    await migrate.upgrade_async(url)
    storage = build(settings=settings, clock=SystemClock())
    await storage.start()
    assert await autocommit(storage).clients.get(new_id()) is None
    await storage.aclose()


def test_the_repr_hides_the_password() -> None:
    storage = SqlStorage("postgresql+asyncpg://app:hunter2@db.internal/wallets", migrate=False)
    assert "hunter2" not in repr(storage) and "db.internal" in repr(storage)
