"""`Auditor.record` around one use case (walletcore.services.audit, module rules): the
request's own entry when it changed nothing, none when a carried entry recorded it, and
the use case's error always raised as it was (a class, not a generator:
docs/performance.md, "Fewer Python calls per request")."""

from __future__ import annotations

import asyncio

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import InvalidRequest, NotFound
from walletcore.services.audit import OK, REPLAY, Auditor
from walletcore.testing import InMemoryStorage

CLIENT, USER = "c" * 24, "u" * 24


async def entries(storage: InMemoryStorage) -> list[AuditEntry]:
    async with storage.read() as unit:
        return list(reversed(await unit.audit.newest()))


@pytest.fixture
def storage() -> InMemoryStorage:
    return InMemoryStorage()


@pytest.fixture
def auditor(storage: InMemoryStorage) -> Auditor:
    return Auditor(storage, ManualClock())


async def test_a_change_carried_writes_no_entry_of_its_own(
    storage: InMemoryStorage, auditor: Auditor
) -> None:
    async with auditor.record("trade.sell", "r1", CLIENT, user_id=USER) as note:
        entry = note.entry()
        async with storage.write() as unit:
            await unit.audit.append(entry)
        note.carried(entry)
    assert [(e.action, e.outcome) for e in await entries(storage)] == [("trade.sell", OK)]


async def test_success_without_a_change_is_a_replay_or_ok(
    storage: InMemoryStorage, auditor: Auditor
) -> None:
    async with auditor.record("trade.approve", "r1", CLIENT, user_id=USER, target="t"):
        pass
    async with auditor.record("auth", "r2", CLIENT, mutating=False):
        pass
    found = await entries(storage)
    assert [(e.action, e.outcome, e.request_id) for e in found] == [
        ("trade.approve", REPLAY, "r1"),
        ("auth", OK, "r2"),
    ]
    assert (found[0].user_id, found[0].target) == (USER, "t")


async def test_an_outcome_a_carried_entry_recorded_is_not_written_twice(
    storage: InMemoryStorage, auditor: Auditor
) -> None:
    with pytest.raises(InvalidRequest):
        async with auditor.record("send", "r1", CLIENT) as note:
            entry = note.entry(outcome="400", detail="refused by the network")
            async with storage.write() as unit:
                await unit.audit.append(entry)
            note.carried(entry)
            raise InvalidRequest("refused by the network")
    assert [(e.outcome, e.detail) for e in await entries(storage)] == [
        ("400", "refused by the network")
    ]


@pytest.mark.parametrize(
    ("error", "outcome", "detail"),
    [
        (NotFound("Trade not found"), "404", "Trade not found"),  # a refusal: its status
        (RuntimeError("boom: a secret 0xdeadbeef"), "500", "internal error"),  # never its text
        (KeyError("k"), "500", "internal error"),
    ],
    ids=["refusal", "unexpected", "key-error"],
)
async def test_a_failed_use_case_is_written_with_its_status_and_raised_as_it_was(
    storage: InMemoryStorage, auditor: Auditor, error: Exception, outcome: str, detail: str
) -> None:
    with pytest.raises(type(error)) as caught:
        async with auditor.record("trade.sell", "r1", CLIENT):
            raise error
    assert caught.value is error
    [entry] = await entries(storage)
    assert (entry.outcome, entry.detail) == (outcome, detail)


async def test_a_cancelled_use_case_is_written_as_a_500_and_stays_cancelled(
    storage: InMemoryStorage, auditor: Auditor
) -> None:
    started = asyncio.Event()

    async def use_case() -> None:
        async with auditor.record("trade.approve", "r1", CLIENT):
            started.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(use_case())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry] = await entries(storage)
    assert entry.outcome == "500"


async def test_a_failing_entry_of_its_own_never_fails_the_request(
    auditor: Auditor, storage: InMemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise OSError("disk full")

    monkeypatch.setattr(storage, "write", broken)
    async with auditor.record("trade.approve", "r1", CLIENT):
        pass  # a replay whose entry cannot be written: still a success
    with pytest.raises(NotFound):
        async with auditor.record("trade.approve", "r2", CLIENT):
            raise NotFound()
