"""The nonce leases contract (`walletcore.testing.contracts.NonceLeasesContract`) on every
adapter of this repository: in one process, lock files beside an SQLite file, and
PostgreSQL advisory locks; "another process" is another storage on the same database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from walletcore import plugins
from walletcore.domain.errors import AddressBusy
from walletcore.ports import NonceLeases
from walletcore.settings import Settings
from walletcore.testing import LocalNonceLeases
from walletcore.testing.contracts import NonceLeasesContract
from walletcore.testing.contracts.nonces import ALICE, CHAIN
from walletcore_sql.nonces import FlockNonceLeases, PgNonceLeases, nonce_leases
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import truncate_async


class TestLocalNonceLeases(NonceLeasesContract):
    @pytest.fixture
    def nonce_leases(self) -> LocalNonceLeases:
        return LocalNonceLeases()


async def _storages(url: str, schema: str | None) -> list[SqlStorage]:
    storages = [SqlStorage(url, migrate=False, schema=schema) for _ in range(2)]
    for storage in storages:
        await storage.start()
    return storages


class TestSqliteNonceLeases(NonceLeasesContract):
    @pytest.fixture
    async def storages(self, sqlite_file: str) -> AsyncIterator[list[SqlStorage]]:
        storages = await _storages(sqlite_file, None)
        yield storages
        for storage in storages:
            await storage.aclose()

    @pytest.fixture
    def nonce_leases(self, storages: list[SqlStorage]) -> NonceLeases:
        leases = nonce_leases(storages[0].database, wait=5.0)
        assert isinstance(leases, FlockNonceLeases)
        return leases

    @pytest.fixture
    def other_nonce_leases(self, storages: list[SqlStorage]) -> NonceLeases:
        return nonce_leases(storages[1].database, wait=5.0)


@pytest.mark.postgres
class TestPostgresNonceLeases(NonceLeasesContract):
    @pytest.fixture
    async def storages(self, pg_url: str, pg_schema: str) -> AsyncIterator[list[SqlStorage]]:
        await truncate_async(pg_url, pg_schema)
        storages = await _storages(pg_url, pg_schema)
        yield storages
        for storage in storages:
            await storage.aclose()

    @pytest.fixture
    def nonce_leases(self, storages: list[SqlStorage]) -> NonceLeases:
        leases = nonce_leases(storages[0].database, wait=5.0)
        assert isinstance(leases, PgNonceLeases)
        return leases

    @pytest.fixture
    def other_nonce_leases(self, storages: list[SqlStorage]) -> NonceLeases:
        return nonce_leases(storages[1].database, wait=5.0)


@pytest.mark.parametrize("name", ["sql", "memory"])
async def test_the_leases_are_named_after_the_storage(tmp_path: Path, name: str) -> None:
    """`walletcore.nonce_leases` has an entry under each `walletcore.repos` name, built on
    the storage the container made (`create_container().nonce_leases()`)."""
    from walletcore.container import create_container

    container = create_container(Settings(home=tmp_path, repo=name))
    leases = container.nonce_leases()
    expected = {"sql": FlockNonceLeases, "memory": LocalNonceLeases}[name]
    assert isinstance(leases, expected)
    if name == "sql":
        storage = container.storage()
        assert isinstance(storage, SqlStorage)
        assert str(tmp_path) in str(leases.directory)
        await storage.aclose()


async def test_sql_leases_refuse_a_storage_of_another_kind(tmp_path: Path) -> None:
    from walletcore.secretfiles import ConfigurationError
    from walletcore.testing import InMemoryStorage

    with pytest.raises(ConfigurationError, match="sql storage"):
        plugins.build(
            "walletcore.nonce_leases",
            "sql",
            settings=Settings(home=tmp_path),
            storage=InMemoryStorage(),
        )


async def test_the_nonce_wait_is_a_setting(tmp_path: Path) -> None:
    """`WALLETCORE_NONCE_WAIT_SECONDS`: how long a send waits for another process's lease
    before `503 Another send from this address is still in progress`."""
    settings = Settings(home=tmp_path, repo="sql", nonce_wait_seconds=0.2)
    storages = [plugins.build("walletcore.repos", "sql", settings=settings) for _ in range(2)]
    first, second = (
        plugins.build("walletcore.nonce_leases", "sql", settings=settings, storage=s)
        for s in storages
    )
    for storage in storages:
        await storage.start()
    try:
        held = await first.acquire(CHAIN, ALICE)
        started = asyncio.get_running_loop().time()
        with pytest.raises(AddressBusy) as busy:
            await second.acquire(CHAIN, ALICE)
        waited = asyncio.get_running_loop().time() - started
        assert 0.2 <= waited < 5, waited
        assert busy.value.status == 503 and "retry" in busy.value.message
        await held.release(1)
        lease = await second.acquire(CHAIN, ALICE)
        assert lease.floor == 1
        await lease.release(None)
    finally:
        for storage in storages:
            await storage.aclose()
