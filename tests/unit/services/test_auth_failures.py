"""A refused `/auth` grows no storage and waits for no write: nothing stored for a malformed
or unknown client id; a known client's refusals tallied, then added up on it in place after
the answer, one audit entry per run of failures; every refusal measured by its reason."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from walletcore.domain.clients import AuthFailures
from walletcore.domain.errors import DomainError, StorageUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.times import format_datetime
from walletcore.ports import Observer, UnitOfWork
from walletcore.ports.metrics import AUTH_FAILURE_REASONS
from walletcore.services.auth_failures import WRITE_DELAY_SECONDS
from walletcore.testing import InMemoryStorage

from ..conftest import Core, CoreFactory

RUN_BEGINS = "the first failed /auth since the last successful one"


class Reasons(Observer):
    """Counts the refusals the auth service reports, by reason."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def auth_failure(self, reason: str) -> None:
        assert reason in AUTH_FAILURE_REASONS
        self.seen[reason] += 1


class CountedWrites(InMemoryStorage):
    """Counts its write units; while `held` is set, a write unit waits for it to clear
    (a disk that takes its time), and with `refuse` it fails (a database that is down)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.held: asyncio.Event | None = None
        self.refuse = False

    @asynccontextmanager
    async def write(self) -> AsyncIterator[UnitOfWork]:
        self.writes += 1
        if self.refuse:
            raise StorageUnavailable()
        if self.held is not None:
            await self.held.wait()
        async with super().write() as unit:
            yield unit


@pytest.fixture
def reasons(core: Core) -> Reasons:
    observer = Reasons()
    core.auth.observer = observer
    return observer


async def refused(core: Core, client_id: object, api_key: object, request_id: str) -> None:
    with pytest.raises(DomainError) as caught:
        await core.auth.authenticate(client_id, api_key, request_id)
    assert (caught.value.status, caught.value.message) == (401, "Invalid credentials")


async def stored(core: Core) -> tuple[object, object]:
    return await core.db.clients.all(), await core.db.audit.newest(1000)


async def failures(core: Core) -> AuthFailures:
    await core.auth.failures.settled()
    client = await core.db.clients.get(core.client.client_id)
    assert client is not None
    return client.auth_failures


async def test_malformed_and_unknown_client_ids_store_nothing(core: Core, reasons: Reasons) -> None:
    before = await stored(core)
    key = core.api_key
    cid = core.client.client_id
    for n in range(50):
        await refused(core, new_id(), key, f"r-unknown-{n}")
        await refused(core, f"acme-{n}", key, f"r-bad-id-{n}")
        await refused(core, None, key, f"r-no-id-{n}")
        await refused(core, cid.upper(), key, f"r-upper-{n}")  # not an id: ids are lower hex
        await refused(core, cid, None, f"r-no-key-{n}")
    await core.auth.failures.settled()
    assert await stored(core) == before
    assert reasons.seen == {"unknown_client": 50, "malformed": 200}


async def test_a_known_clients_failures_are_counted_on_it_and_a_run_audited_once(
    core: Core, reasons: Reasons
) -> None:
    cid = core.client.client_id
    times = []
    for n in range(300):
        times.append(core.clock.advance(1))
        await refused(core, cid, core.api_key + "x", f"r-wrong-{n}")
        if n % 50 == 0:  # in several tallies, the writer's rounds
            await core.auth.failures.settled()
    assert await failures(core) == AuthFailures(300, times[0], times[-1])
    entries = [e for e in await core.db.audit.newest(1000) if e.action == "auth"]
    assert [(e.request_id, e.outcome, e.client_id, e.at) for e in entries] == [
        ("r-wrong-0", "401", cid, times[0])
    ]
    assert entries[0].detail == f"Invalid credentials (wrong key): {RUN_BEGINS}"
    assert reasons.seen == {"wrong_key": 300}


async def test_a_refusal_answers_before_its_count_is_written(make_core: CoreFactory) -> None:
    """Written after the answer, so a known id's refusal waits for no commit an unknown
    id's would not: the two take the same time."""
    storage = CountedWrites()
    core = await make_core(storage=storage)
    storage.held = asyncio.Event()
    await asyncio.wait_for(refused(core, core.client.client_id, "wck_wrong", "r-wrong"), 1)
    await asyncio.sleep(0.01)
    client = await core.db.clients.get(core.client.client_id)
    assert client is not None and client.auth_failures.count == 0  # still being written
    storage.held.set()
    # the writer writes on its own, a moment (WRITE_DELAY_SECONDS) after the refusal
    deadline = asyncio.get_running_loop().time() + 2
    while (written := await core.db.clients.get(core.client.client_id)).auth_failures.count == 0:
        assert asyncio.get_running_loop().time() < deadline, "the writer never wrote"
        await asyncio.sleep(WRITE_DELAY_SECONDS / 5)
    assert written.auth_failures.count == 1


async def test_a_flood_of_refusals_costs_a_write_per_round_not_per_refusal(
    make_core: CoreFactory,
) -> None:
    storage = CountedWrites()
    core = await make_core(storage=storage)
    before = storage.writes
    await asyncio.gather(
        *(refused(core, core.client.client_id, "wck_wrong", f"r-{n}") for n in range(500))
    )
    assert (await failures(core)).count == 500
    assert storage.writes - before <= 2  # a round, perhaps a second for late arrivals


async def test_a_success_ends_the_run_with_its_length_and_the_next_failure_begins_one(
    core: Core, reasons: Reasons
) -> None:
    cid = core.client.client_id
    first = core.clock.now()
    for n in range(3):
        last = core.clock.now()
        await refused(core, cid, "wck_wrong", f"r-wrong-{n}")
        core.clock.advance(1)
    # the refusals may still wait for the writer: the success counts them in the run
    await core.auth.authenticate(cid, core.api_key, "r-ok")
    assert await failures(core) == AuthFailures(0, None, last)
    auth = [e for e in await core.db.audit.newest(1000) if e.action == "auth"]
    assert [(e.request_id, e.outcome, e.detail) for e in reversed(auth)] == [
        ("r-wrong-0", "401", f"Invalid credentials (wrong key): {RUN_BEGINS}"),
        ("r-ok", "ok", f"ends a run of 3 failed /auth since {format_datetime(first)}"),
    ]
    # a success with no run before it: `ok`, no detail, as ever
    await core.auth.authenticate(cid, core.api_key, "r-ok-again")
    again = [e for e in await core.db.audit.newest(1000) if e.request_id == "r-ok-again"]
    assert [(e.outcome, e.detail) for e in again] == [("ok", None)]
    # the next failure begins a new run, audited again
    await refused(core, cid, "wck_wrong", "r-wrong-again")
    assert (await failures(core)).count == 1
    newest = await core.db.audit.newest(1)
    assert [(e.request_id, e.outcome) for e in newest] == [("r-wrong-again", "401")]


async def test_a_success_after_written_refusals_ends_their_run(
    core: Core, reasons: Reasons
) -> None:
    cid = core.client.client_id
    for n in range(2):
        await refused(core, cid, "wck_wrong", f"r-wrong-{n}")
    assert (await failures(core)).count == 2
    await core.auth.authenticate(cid, core.api_key, "r-ok")
    assert (await failures(core)).count == 0
    ok = [e for e in await core.db.audit.newest(1000) if e.request_id == "r-ok"]
    assert [e.detail for e in ok] == [
        f"ends a run of 2 failed /auth since {format_datetime(core.clock.now())}"
    ]


async def test_a_disabled_client_is_counted_with_its_reason(core: Core, reasons: Reasons) -> None:
    cid = core.client.client_id
    await core.auth.disable_client(cid, "r-disable")
    await refused(core, cid, core.api_key, "r-disabled")
    await refused(core, cid, "wck_wrong", "r-disabled-wrong")
    assert (await failures(core)).count == 2
    assert reasons.seen == {"disabled": 1, "wrong_key": 1}
    entry = [e for e in await core.db.audit.newest(1000) if e.request_id == "r-disabled"]
    assert [e.detail for e in entry] == [f"Invalid credentials (disabled): {RUN_BEGINS}"]


async def test_the_operators_changes_keep_the_count(core: Core, reasons: Reasons) -> None:
    cid = core.client.client_id
    for n in range(4):
        await refused(core, cid, "wck_wrong", f"r-wrong-{n}")
    await core.auth.failures.settled()
    rotated = await core.auth.rotate_key(cid, "r-rotate")
    await core.auth.update_client(cid, name="Acme Pay EU", request_id="r-update")
    assert (await failures(core)).count == 4
    await core.auth.authenticate(cid, rotated.api_key, "r-ok")
    assert (await failures(core)).count == 0


async def test_a_count_the_storage_refuses_is_logged_and_the_answer_stands(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The storage cannot take the count (down, locked): the caller was refused all the
    same, never told `503` for credentials that are wrong; the log says what was lost."""
    storage = CountedWrites()
    core = await make_core(storage=storage)
    storage.refuse = True
    with caplog.at_level(logging.WARNING, "walletcore.auth"):
        await refused(core, core.client.client_id, "wck_wrong", "r-wrong")
        await refused(core, new_id(), "wck_wrong", "r-unknown")
        await core.auth.failures.settled()
    storage.refuse = False
    assert (await failures(core)).count == 0
    lost = f"1 refused /auth of client {core.client.client_id} not counted"
    assert [r.getMessage() for r in caplog.records] == [
        f"{lost}: {StorageUnavailable.default_message}"
    ]
