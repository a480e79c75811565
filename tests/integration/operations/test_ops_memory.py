"""A worker's memory snapshots (`walletcore_litestar.memory`, WALLETCORE_MEMORY_SNAPSHOTS):
off by default; when set, each SIGUSR2 writes a `tracemalloc` snapshot that loads."""

from __future__ import annotations

import os
import signal
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from walletcore_litestar.memory import snapshot_memory_on_sigusr2
from walletcore_litestar.operations import OperationsSettings

ENV = "WALLETCORE_MEMORY_SNAPSHOTS"


@pytest.fixture(autouse=True)
def process_restored() -> Iterator[None]:
    """This test process's SIGUSR2 handler and tracing as they were."""
    handler = signal.getsignal(signal.SIGUSR2)
    tracing = tracemalloc.is_tracing()
    yield
    signal.signal(signal.SIGUSR2, handler)
    if not tracing:
        tracemalloc.stop()


def snapshots_after_signal(folder: Path, count: int) -> list[Path]:
    """Send SIGUSR2 to this process; the snapshots in `folder` once there are `count`."""
    os.kill(os.getpid(), signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while len(found := sorted(folder.glob("worker-*.tracemalloc"))) < count:
        assert time.monotonic() < deadline, "no snapshot written"
        time.sleep(0.01)  # the handler runs in this (the main) thread, between bytecodes
    return found


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert OperationsSettings().memory_snapshots is None
    before = signal.getsignal(signal.SIGUSR2)
    assert snapshot_memory_on_sigusr2(None) is False
    assert signal.getsignal(signal.SIGUSR2) is before


def test_each_sigusr2_writes_a_snapshot_of_what_was_allocated_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "snapshots"
    monkeypatch.setenv(ENV, str(folder))
    assert snapshot_memory_on_sigusr2(OperationsSettings().memory_snapshots) is True
    assert tracemalloc.is_tracing()
    assert folder.stat().st_mode & 0o777 == 0o700
    kept = [bytearray(4096) for _ in range(256)]  # 1 MB allocated here, while traced
    first = snapshots_after_signal(folder, 1)
    assert first[0].name == f"worker-{os.getpid()}-1.tracemalloc"
    here = tracemalloc.Snapshot.load(str(first[0])).filter_traces(
        [tracemalloc.Filter(True, __file__)]
    )
    assert sum(stat.size for stat in here.statistics("filename")) >= len(kept) * 4096
    second = snapshots_after_signal(folder, 2)
    assert second[1].name == f"worker-{os.getpid()}-2.tracemalloc"
    assert not list(folder.glob("*.partial"))  # written whole, then renamed
