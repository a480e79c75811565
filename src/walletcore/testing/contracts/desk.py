"""The storage promises of the desk's pauses (`DeskPauseStore`): one pause per (client,
asset), set and removed with their entry only when they applied, read by asset and by
client, nothing written from a read unit or a unit that raised. Part of `StorageContract`
(its base class)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.audit import AuditEntry
from walletcore.domain.desk import DeskPause
from walletcore.domain.ids import new_id
from walletcore.ports.storage import Storage
from walletcore.testing.contracts.deposits import _client
from walletcore.testing.storage import autocommit

P0 = datetime(2026, 3, 1, 9, 30, 0, 125000, tzinfo=UTC)
ETH, USDT, BTC = 2, 21, 1


def _pause(client_id: str, asset_id: int = ETH, reason: str = "the desk is short") -> DeskPause:
    return DeskPause(client_id, asset_id, reason, P0)


def _entry(client_id: str, action: str) -> AuditEntry:
    return AuditEntry(P0, client_id, action, f"req-{new_id()}", "ok", target=str(ETH))


async def _actions(storage: Storage, client_id: str) -> list[str]:
    newest = await autocommit(storage).audit.newest(limit=50)
    return [e.action for e in reversed(newest) if e.client_id == client_id]


class DeskPauseStorageContract:
    """Deliveries paused per client and asset (module docstring)."""

    async def test_a_pause_round_trips_and_a_second_one_keeps_the_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        first = _pause(client_id, reason="short of 0.3 ETH: é")
        assert await db.desk_pauses.pause(first, entry=_entry(client_id, "desk.pause"))
        stored = await db.desk_pauses.get(client_id, ETH)
        assert stored == first and stored.paused_at.tzinfo is not None
        again = DeskPause(client_id, ETH, "another reason", P0 + timedelta(seconds=5))
        assert not await db.desk_pauses.pause(again, entry=_entry(client_id, "desk.again"))
        assert await db.desk_pauses.get(client_id, ETH) == first
        assert await _actions(storage, client_id) == ["desk.pause"]
        # the key is the client's and the asset's
        assert await db.desk_pauses.get(client_id, USDT) is None
        other = await _client(storage)
        assert await db.desk_pauses.get(other, ETH) is None

    async def test_a_resume_removes_the_pause_once(self, storage: Storage) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        assert await db.desk_pauses.pause(_pause(client_id))
        assert await db.desk_pauses.resume(client_id, ETH, entry=_entry(client_id, "desk.resume"))
        assert await db.desk_pauses.get(client_id, ETH) is None
        assert await db.desk_pauses.of_client(client_id) == []
        # nothing to remove: nothing written, nor its entry
        assert not await db.desk_pauses.resume(
            client_id, ETH, entry=_entry(client_id, "desk.again")
        )
        assert await _actions(storage, client_id) == ["desk.resume"]
        # paused again after a resume
        assert await db.desk_pauses.pause(_pause(client_id, reason="again"))
        assert (await db.desk_pauses.get(client_id, ETH)).reason == "again"

    async def test_of_client_lists_its_pauses_by_asset(self, storage: Storage) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        db = autocommit(storage)
        for asset_id in (USDT, BTC, ETH):
            assert await db.desk_pauses.pause(_pause(client_id, asset_id))
        assert await db.desk_pauses.pause(_pause(other, ETH))
        assert [p.asset_id for p in await db.desk_pauses.of_client(client_id)] == [BTC, ETH, USDT]
        assert await db.desk_pauses.of_client(other) == [_pause(other, ETH)]
        assert await db.desk_pauses.of_client(new_id()) == []

    async def test_a_read_unit_cannot_pause_and_a_unit_that_raised_writes_nothing(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        async with storage.read() as unit:
            with pytest.raises(RuntimeError):
                await unit.desk_pauses.pause(_pause(client_id))
            with pytest.raises(RuntimeError):
                await unit.desk_pauses.resume(client_id, ETH)
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                assert await unit.desk_pauses.pause(_pause(client_id))
                assert await unit.desk_pauses.get(client_id, ETH) is not None
                raise LookupError("rolled back")
        assert await autocommit(storage).desk_pauses.get(client_id, ETH) is None
        assert await autocommit(storage).desk_pauses.pause(_pause(client_id))
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                assert await unit.desk_pauses.resume(client_id, ETH)
                assert await unit.desk_pauses.get(client_id, ETH) is None
                raise LookupError("rolled back")
        assert await autocommit(storage).desk_pauses.get(client_id, ETH) == _pause(client_id)
