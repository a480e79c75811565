"""The storage promises of refused `/auth` (`ClientStore.add_auth_failures`,
`.auth_succeeded`): counted in place on the client, exactly under races, the first of a run
audited, nothing stored for an unknown id. Part of `StorageContract` (its base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.assets import FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, AuthFailures
from walletcore.domain.ids import new_id
from walletcore.ports.storage import Storage
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
#: Racing additions: enough to overlap on every adapter's connections (PostgreSQL's pool).
RACERS = 24
#: A race that deadlocked would hang: it must end well within this.
RACE_SECONDS = 30


def _at(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


def _entry(client_id: str, n: int) -> AuditEntry:
    return AuditEntry(_at(n), client_id, "auth", f"req-{n}", "401", detail="Invalid credentials")


def _one(n: int) -> AuthFailures:
    """One refusal at `_at(n)`."""
    return AuthFailures(1, _at(n), _at(n))


async def _client(storage: Storage) -> ApiClient:
    client = ApiClient(new_id(), "Auth", "ef" * 32, (1, 2), FeePayer.USER, {}, False, 1, T0)
    await autocommit(storage).clients.add(client)
    return client


async def _failures(storage: Storage, client_id: str) -> AuthFailures:
    async with storage.read() as unit:
        stored = await unit.clients.get(client_id)
    assert stored is not None
    return stored.auth_failures


async def _add(
    storage: Storage, client_id: str, n: int, failures: AuthFailures | None = None
) -> bool:
    """`failures` (one refusal at `_at(n)` unless given), with the entry of request n."""
    async with storage.write() as unit:
        return await unit.clients.add_auth_failures(
            client_id, failures or _one(n), entry=_entry(client_id, n)
        )


class AuthFailureStorageContract:
    """What `/auth` needs of a `storage` fixture to count its refusals."""

    pytestmark = pytest.mark.asyncio

    async def test_a_new_client_has_no_failures(self, storage: Storage) -> None:
        client = await _client(storage)
        assert await _failures(storage, client.client_id) == AuthFailures()

    async def test_failures_add_up_in_place_and_only_a_runs_first_carries_its_entry(
        self, storage: Storage
    ) -> None:
        client = await _client(storage)
        began = [await _add(storage, client.client_id, n) for n in range(3)]
        # a tally of several refusals adds them all at once
        began.append(await _add(storage, client.client_id, 3, AuthFailures(5, _at(3), _at(7))))
        assert began == [True, False, False, False]
        assert await _failures(storage, client.client_id) == AuthFailures(8, _at(0), _at(7))
        assert await autocommit(storage).audit.newest() == [_entry(client.client_id, 0)]

    async def test_a_tally_that_begins_a_run_sets_its_first_refusal(self, storage: Storage) -> None:
        client = await _client(storage)
        assert await _add(storage, client.client_id, 2, AuthFailures(3, _at(2), _at(4)))
        assert await _failures(storage, client.client_id) == AuthFailures(3, _at(2), _at(4))

    async def test_failures_without_an_entry_are_counted_alike(self, storage: Storage) -> None:
        client = await _client(storage)
        async with storage.write() as unit:
            assert await unit.clients.add_auth_failures(client.client_id, _one(0))
            assert not await unit.clients.add_auth_failures(client.client_id, _one(1))
        assert await _failures(storage, client.client_id) == AuthFailures(2, _at(0), _at(1))
        assert await autocommit(storage).audit.newest() == []

    async def test_failures_of_an_unknown_client_store_nothing(self, storage: Storage) -> None:
        client = await _client(storage)
        assert not await _add(storage, new_id(), 0)
        assert await autocommit(storage).clients.all() == [client]
        assert await autocommit(storage).audit.newest() == []

    async def test_a_success_ends_the_run_and_the_next_failure_begins_another(
        self, storage: Storage
    ) -> None:
        client = await _client(storage)
        for n in range(3):
            await _add(storage, client.client_id, n)
        async with storage.write() as unit:
            ended = await unit.clients.auth_succeeded(client.client_id)
        assert ended == AuthFailures(3, _at(0), _at(2))
        # the run is over; when the latest failure was stays known
        assert await _failures(storage, client.client_id) == AuthFailures(0, None, _at(2))
        async with storage.write() as unit:  # a success with no run ends nothing
            ended = await unit.clients.auth_succeeded(client.client_id)
        assert ended == AuthFailures(0, None, _at(2))
        assert await _add(storage, client.client_id, 9)
        assert await _failures(storage, client.client_id) == AuthFailures(1, _at(9), _at(9))
        entries = await autocommit(storage).audit.newest()
        assert [e.request_id for e in entries] == ["req-9", "req-0"]

    async def test_a_success_of_an_unknown_client_stores_nothing(self, storage: Storage) -> None:
        client = await _client(storage)
        async with storage.write() as unit:
            assert await unit.clients.auth_succeeded(new_id()) == AuthFailures()
        assert await autocommit(storage).clients.all() == [client]

    async def test_an_update_of_the_client_keeps_its_failures(self, storage: Storage) -> None:
        """`clients rotate` and the operator's other changes write the client they read:
        the failures counted meanwhile stay."""
        client = await _client(storage)
        for n in range(2):
            await _add(storage, client.client_id, n)
        rotated = dataclasses.replace(client, key_hash="01" * 32, key_generation=2)
        await autocommit(storage).clients.update(rotated)
        async with storage.read() as unit:
            stored = await unit.clients.get(client.client_id)
        assert stored == dataclasses.replace(rotated, auth_failures=AuthFailures(2, _at(0), _at(1)))

    async def test_failures_are_changes_of_a_write_unit(self, storage: Storage) -> None:
        client = await _client(storage)
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.clients.add_auth_failures(client.client_id, _one(0))
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.clients.auth_succeeded(client.client_id)
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                await unit.clients.add_auth_failures(
                    client.client_id, _one(0), entry=_entry(client.client_id, 0)
                )
                raise LookupError("rolled back")
        assert await _failures(storage, client.client_id) == AuthFailures()
        assert await autocommit(storage).audit.newest() == []

    async def test_racing_failures_each_count_once_and_one_begins_the_run(
        self, storage: Storage
    ) -> None:
        client = await _client(storage)
        began = await asyncio.wait_for(
            asyncio.gather(*(_add(storage, client.client_id, n) for n in range(RACERS))),
            RACE_SECONDS,
        )
        assert sum(began) == 1
        failures = await _failures(storage, client.client_id)
        assert (failures.count, failures.last_at) == (RACERS, _at(RACERS - 1))
        assert len(await autocommit(storage).audit.newest(1000)) == 1

    async def test_failures_racing_rotations_and_a_success_lose_no_count(
        self, storage: Storage
    ) -> None:
        """The operator's changes (read, then write the client, as `clients rotate` and
        `disable` do) and a success ending the run race the failures: none deadlocks, and
        every failure counts in the run the success ended or in the one after it."""
        client = await _client(storage)
        ended: list[AuthFailures] = []

        async def rotate() -> None:
            async with storage.write() as unit:
                stored = await unit.clients.get(client.client_id)
                assert stored is not None
                await asyncio.sleep(0)  # let the failures in between the read and the write
                changed = dataclasses.replace(stored, key_generation=stored.key_generation + 1)
                await unit.clients.update(changed)

        async def succeed() -> None:
            async with storage.write() as unit:
                ended.append(await unit.clients.auth_succeeded(client.client_id))

        work: list[Awaitable[bool | None]] = [
            _add(storage, client.client_id, n) for n in range(RACERS)
        ]
        work[RACERS // 3 : RACERS // 3] = [rotate() for _ in range(4)]
        work.insert(RACERS // 2, succeed())
        began = await asyncio.wait_for(asyncio.gather(*work), RACE_SECONDS)
        after = await _failures(storage, client.client_id)
        assert ended[0].count + after.count == RACERS
        # each run has one first failure: the one ended (if any), the one after (if any)
        assert sum(1 for b in began if b is True) == (ended[0].count > 0) + (after.count > 0)
        entries = await autocommit(storage).audit.newest(1000)
        assert len(entries) == (ended[0].count > 0) + (after.count > 0)
        async with storage.read() as unit:
            stored = await unit.clients.get(client.client_id)
        assert stored is not None and stored.key_generation > client.key_generation
