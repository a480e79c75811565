"""The `follow_sends` job on SQLite with the sandbox chains: a send the network accepted is
`pending` on chain until the job finds it final, then moves once, with one `send.settle`
entry; records it cannot follow are skipped; a node error leaves the send pending."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from follow_support import Sender, sending_container, settle_entries
from jobs_support import CountingFeed, CountingVenue, PgSchema

from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain
from walletcore.domain.errors import NodeUnavailable
from walletcore.domain.sends import ChainStatus
from walletcore.jobs import InProcessJobs, Jobs, JobsMode
from walletcore.ports import Observer
from walletcore.services.send_record import SignedSend
from walletcore.testing.storage import autocommit
from walletcore_jobs.urls import libpq_url
from walletcore_jobs.worker import run_worker
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage

T0 = datetime(2026, 4, 1, 12, tzinfo=UTC)
CONFIRM = 5.0  # seconds from broadcast until the sandbox chain reads `success`


class Recording(Observer):
    def __init__(self) -> None:
        self.pending: list[int] = []

    def sends_pending(self, count: int) -> None:
        self.pending.append(count)


@dataclasses.dataclass
class World:
    clock: ManualClock
    storage: SqlStorage
    sender: Sender
    jobs: Jobs
    observer: Recording
    lookups: list[str]

    def after_confirmation(self) -> None:
        self.clock.advance(CONFIRM + 1)


def _count_lookups(container: Any, lookups: list[str]) -> None:
    for gateway in container.gateways().values():
        real = gateway.lookup

        async def lookup(address: str, asset: Any, tx_hash: str, real: Any = real) -> Any:
            lookups.append(tx_hash)
            return await real(address, asset, tx_hash)

        gateway.lookup = lookup


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = ManualClock(T0)
    storage = SqlStorage(sqlite_url(tmp_path / "walletcore.db"), migrate=True)
    await storage.start()
    container = sending_container(
        storage, home=tmp_path / "home", clock=clock, confirm_seconds=CONFIRM
    )
    lookups: list[str] = []
    _count_lookups(container, lookups)
    jobs = container.jobs()
    observer = jobs.observer = Recording()
    sender = await Sender(container).start()
    try:
        yield World(clock, storage, sender, jobs, observer, lookups)
    finally:
        await storage.aclose()


async def test_a_user_send_is_followed_to_success_once(world: World) -> None:
    user_id, address = await world.sender.user()
    receipt = await world.sender.send(user_id, "send-1")
    assert receipt.status == "pending"
    record = await world.sender.record("send-1")
    assert record.chain_status is ChainStatus.PENDING and record.chain_final_at is None
    assert SignedSend.from_bytes(record.raw_tx).sender == address

    # before the chain confirms it: asked, left pending, put behind (checked now)
    world.clock.advance(1)
    assert await world.jobs.follow_sends() == 0
    still = await world.sender.record("send-1")
    assert still.chain_status is ChainStatus.PENDING
    assert still.chain_checked_at == world.clock.now()
    assert world.lookups == [receipt.tx_hash]
    assert await settle_entries(world.storage) == []

    world.after_confirmation()
    assert await world.jobs.follow_sends() == 1
    settled = await world.sender.record("send-1")
    assert settled.chain_status is ChainStatus.SUCCESS
    assert settled.chain_final_at == world.clock.now()
    assert settled.result == record.result  # the replayed answer is the first one
    (entry,) = await settle_entries(world.storage)
    assert entry.target == receipt.tx_hash and entry.detail == "pending -> success"
    assert entry.user_id == user_id and entry.client_id == world.sender.client.client_id
    assert entry.request_id.startswith("job-follow-")
    # what /txid answers agrees
    found = await world.sender.container.wallet_reads().txid(
        world.sender.caller("txid"), asset_id=2, user_id=user_id, tx_hash=receipt.tx_hash
    )
    assert found.row.status == "success"

    # a second run: nothing to ask, nothing written
    asked = len(world.lookups)  # the job's two, and /txid's
    assert await world.jobs.follow_sends() == 0
    assert len(world.lookups) == asked == 3
    assert len(await settle_entries(world.storage)) == 1
    assert await world.sender.record("send-1") == settled
    assert world.observer.pending == [1, 0, 0]


async def test_a_platform_send_is_followed_too(world: World) -> None:
    await world.sender.platform(Chain.SOLANA, 6, "2")
    receipt = await world.sender.platform_send(6, "platform-1", "0.5")
    assert (await world.sender.record("platform-1")).chain_status is ChainStatus.PENDING
    world.after_confirmation()
    assert await world.jobs.follow_sends() == 1
    assert (await world.sender.record("platform-1")).chain_status is ChainStatus.SUCCESS
    (entry,) = await settle_entries(world.storage)
    assert (entry.target, entry.user_id) == (receipt.tx_hash, None)


async def test_a_failed_transaction_is_stored_as_failed(world: World) -> None:
    user_id, _ = await world.sender.user()
    receipt = await world.sender.send(user_id, "send-1")
    gateway = world.sender.container.gateways()[Chain.ETHEREUM]
    real = gateway.lookup

    async def reverted(address: str, asset: Any, tx_hash: str) -> Any:
        return dataclasses.replace(await real(address, asset, tx_hash), status="failed")

    gateway.lookup = reverted
    assert await world.jobs.follow_sends() == 1
    assert (await world.sender.record("send-1")).chain_status is ChainStatus.FAILED
    (entry,) = await settle_entries(world.storage)
    assert (entry.target, entry.detail) == (receipt.tx_hash, "pending -> failed")


async def test_a_record_without_its_sender_is_skipped_and_does_not_hold_up_others(
    world: World,
) -> None:
    user_id, _ = await world.sender.user()
    old = await world.sender.send(user_id, "old")
    new = await world.sender.send(user_id, "new")
    # "old" as a record signed before format 2 (and followed by mistake): no sender
    record = await world.sender.record("old")
    value = json.loads(record.raw_tx)
    value.update(v=1)
    del value["sender"], value["userId"]
    v1 = json.dumps(value).encode()
    assert SignedSend.from_bytes(v1).sender is None
    assert SignedSend.from_bytes(v1).raw == base64.b64decode(value["raw"])
    db = autocommit(world.storage)
    assert await db.sends.advance(record, dataclasses.replace(record, raw_tx=v1))

    world.after_confirmation()
    assert await world.jobs.follow_sends() == 1
    assert world.lookups == [new.tx_hash]  # the chain is never asked about "old"
    skipped = await world.sender.record("old")
    assert skipped.chain_status is ChainStatus.PENDING
    assert skipped.chain_checked_at == world.clock.now()  # behind the others next run
    assert (await world.sender.record("new")).chain_status is ChainStatus.SUCCESS
    assert [e.target for e in await settle_entries(world.storage)] == [new.tx_hash]
    assert old.tx_hash != new.tx_hash


async def test_a_node_error_leaves_the_send_pending_until_the_node_answers(
    world: World,
) -> None:
    user_id, _ = await world.sender.user()
    receipt = await world.sender.send(user_id, "send-1")
    gateway = world.sender.container.gateways()[Chain.ETHEREUM]
    real = gateway.lookup

    async def down(address: str, asset: Any, tx_hash: str) -> Any:
        raise NodeUnavailable()

    gateway.lookup = down
    world.after_confirmation()
    assert await world.jobs.follow_sends() == 0
    assert (await world.sender.record("send-1")).chain_status is ChainStatus.PENDING
    assert await settle_entries(world.storage) == []
    assert world.observer.pending == [1]

    gateway.lookup = real
    assert await world.jobs.follow_sends() == 1
    (entry,) = await settle_entries(world.storage)
    assert entry.target == receipt.tx_hash


async def test_a_refused_send_and_an_unfinished_one_are_not_followed(world: World) -> None:
    user_id, _ = await world.sender.user()
    db = autocommit(world.storage)
    await db.sends.begin(world.sender.client.client_id, "in-flight", "fp", world.clock.now())
    with pytest.raises(Exception) as caught:
        await world.sender.send(user_id, "too-much", amount="5")  # more than it holds
    assert getattr(caught.value, "status", 0) >= 400
    assert await db.sends.following(10) == []
    assert await world.jobs.follow_sends() == 0
    assert world.lookups == []


async def test_two_processes_following_together_settle_each_send_once(
    world: World, tmp_path: Path
) -> None:
    """`serve --workers 2` on one SQLite file: both run the job; each send moves once."""
    user_id, _ = await world.sender.user()
    sent = [await world.sender.send(user_id, f"send-{n}") for n in range(4)]
    other_storage = SqlStorage(world.storage.database.url, migrate=False)
    await other_storage.start()
    try:
        other = sending_container(
            other_storage, home=tmp_path / "home", clock=world.clock, confirm_seconds=CONFIRM
        )
        world.after_confirmation()
        moved = await asyncio.gather(world.jobs.follow_sends(), other.jobs().follow_sends())
        assert sum(moved) == len(sent)
        targets = sorted(e.target for e in await settle_entries(world.storage))
        assert targets == sorted(r.tx_hash for r in sent)
        assert await autocommit(world.storage).sends.following(10) == []
    finally:
        await other_storage.aclose()


async def test_the_in_process_runner_runs_the_follow_job(world: World) -> None:
    user_id, _ = await world.sender.user()
    await world.sender.send(user_id, "send-1")
    world.after_confirmation()
    assert "follow_sends" in [job.name for job in world.jobs.periodic()]
    runner = InProcessJobs(world.jobs)
    await runner.start()  # each job once, before serving
    try:
        assert runner.runs["follow_sends"] == 1
        assert (await world.sender.record("send-1")).chain_status is ChainStatus.SUCCESS
    finally:
        await runner.aclose()


# -- on PostgreSQL, two procrastinate workers --------------------------------------------
FAST = {
    "update_heartbeat_interval": 0.5,
    "stalled_worker_timeout": 2,
    "fetch_job_polling_interval": 0.2,
    "install_signal_handlers": False,
}


def _record_lookups(container: Any, seen: list[tuple[str, str]]) -> None:
    """Every answer the container's gateways give a lookup: (tx hash, status)."""
    for gateway in container.gateways().values():
        real = gateway.lookup

        async def lookup(address: str, asset: Any, tx_hash: str, real: Any = real) -> Any:
            row = await real(address, asset, tx_hash)
            seen.append((tx_hash, row.status))
            return row

        gateway.lookup = lookup


@pytest.mark.postgres
async def test_two_workers_follow_each_send_once(pg_schema: PgSchema, tmp_path: Path) -> None:
    home = tmp_path / "home"  # one sandbox ledger for the sender and both workers
    storage = pg_schema.storage()
    sender = await Sender(
        sending_container(
            storage,
            home=home,
            confirm_seconds=0.5,
            mode=JobsMode.PROCRASTINATE,
            database_url=pg_schema.url,
        )
    ).start()
    user_id, _ = await sender.user()
    await sender.platform(Chain.ETHEREUM, 2, "1")
    sent = [await sender.send(user_id, f"send-{n}") for n in range(4)]
    sent.append(await sender.platform_send(2, "platform-0", "0.01"))

    seen: list[tuple[str, str]] = []
    workers = []
    for n in range(2):
        worker = sending_container(
            pg_schema.storage(),
            home=home,
            confirm_seconds=0.5,
            mode=JobsMode.PROCRASTINATE,
            database_url=pg_schema.url,
            follow_seconds=1,
            price_feed=CountingFeed(),
            venue=CountingVenue(),
        )
        _record_lookups(worker, seen)
        workers.append(worker)
    tasks = [
        asyncio.create_task(run_worker(w, schema=pg_schema.schema, stalled_seconds=2, **FAST))
        for w in workers
    ]
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while await autocommit(storage).sends.following(10):
            assert asyncio.get_running_loop().time() < deadline, "sends never followed"
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.5)  # more periods: nothing moves twice
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    for n in range(4):
        assert (await sender.record(f"send-{n}")).chain_status is ChainStatus.SUCCESS
    assert (await sender.record("platform-0")).chain_status is ChainStatus.SUCCESS
    hashes = sorted(r.tx_hash for r in sent)
    # one `send.settle` each, and the chain asked once about each final transaction
    assert sorted(e.target for e in await settle_entries(storage)) == hashes
    assert Counter(h for h, status in seen if status == "success") == {h: 1 for h in hashes}
    async with await psycopg.AsyncConnection.connect(
        libpq_url(pg_schema.url), options=f"-c search_path={pg_schema.schema}", autocommit=True
    ) as conn:
        runs = await (
            await conn.execute(
                "SELECT args->>'timestamp', count(*) FROM procrastinate_jobs "
                "WHERE task_name = 'walletcore.follow_sends' GROUP BY 1"
            )
        ).fetchall()
    # Each period deferred, at most once by each worker: procrastinate keeps one row per
    # task and second, but drops the older ones when it defers a newer period, so a worker
    # a whole period behind the other defers that older period again (the job is safe to
    # run twice: the first run settled the sends, the second finds none to follow).
    assert runs and all(1 <= count <= len(workers) for _, count in runs)
    for container in (sender.container, *workers):
        await container.storage().aclose()


def test_the_pending_gauge_appears_with_the_first_run_of_the_job() -> None:
    from walletcore_litestar.metrics import PrometheusObserver

    observer = PrometheusObserver()
    assert b"walletcore_sends_pending" not in observer.exposition()  # never a false 0
    observer.sends_pending(3)
    observer.sends_pending(2)
    assert b"\nwalletcore_sends_pending 2.0\n" in observer.exposition()
