"""A worker's memory snapshots (`walletcore_litestar.memory`, WALLETCORE_MEMORY_SNAPSHOTS):
off by default; when set, the first SIGUSR2 starts tracing and each later one writes a
`tracemalloc` snapshot that loads."""

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


def signalled() -> None:
    """SIGUSR2 to this process; back once its handler ran (in this, the main, thread,
    between two bytecodes: a few loop turns here at most)."""
    os.kill(os.getpid(), signal.SIGUSR2)
    for _ in range(100):
        time.sleep(0.001)


def snapshots(folder: Path) -> list[Path]:
    return sorted(folder.glob("worker-*.tracemalloc"))


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert OperationsSettings().memory_snapshots is None
    before = signal.getsignal(signal.SIGUSR2)
    assert snapshot_memory_on_sigusr2(None) is False
    assert signal.getsignal(signal.SIGUSR2) is before


def test_the_first_sigusr2_starts_tracing_and_each_later_one_writes_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if tracemalloc.is_tracing():  # PYTHONTRACEMALLOC: the first signal would write
        tracemalloc.stop()
    folder = tmp_path / "snapshots"
    monkeypatch.setenv(ENV, str(folder))
    assert snapshot_memory_on_sigusr2(OperationsSettings().memory_snapshots) is True
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not tracemalloc.is_tracing()  # nothing costs anything before the signal
    signalled()
    assert tracemalloc.is_tracing() and snapshots(folder) == []
    kept = [bytearray(4096) for _ in range(256)]  # 1 MB allocated here, while traced
    signalled()
    first = snapshots(folder)
    assert [p.name for p in first] == [f"worker-{os.getpid()}-1.tracemalloc"]
    here = tracemalloc.Snapshot.load(str(first[0])).filter_traces(
        [tracemalloc.Filter(True, __file__)]
    )
    assert sum(stat.size for stat in here.statistics("filename")) >= len(kept) * 4096
    signalled()
    assert [p.name for p in snapshots(folder)][-1] == f"worker-{os.getpid()}-2.tracemalloc"
    assert not list(folder.glob("*.partial"))  # written whole, then renamed
