"""An opt-in look at a server worker's memory: `tracemalloc` snapshots written on SIGUSR2.

With `WALLETCORE_MEMORY_SNAPSHOTS=<folder>` (`OperationsSettings.memory_snapshots`), each
`walletcore serve` worker starts `tracemalloc` once its app is built, and `kill -USR2
<worker pid>` writes what it traced to `<folder>/worker-<pid>-<n>.tracemalloc` (the n-th
snapshot of that worker; `tracemalloc.Snapshot.load` reads it). Two snapshots of the same
worker, taken minutes apart under load, compared (`Snapshot.compare_to`) name the lines
whose allocations grew (`bench/memory_bench.py --tracemalloc`, docs/performance.md).

Off by default, and for diagnosis only: tracing slows every allocation and holds a record
of each live one. A snapshot holds file names, line numbers and sizes, never a value. It is
written from the signal's handler, on the worker's event loop thread, which it holds for as
long as the file takes to write (about a second for a worker under load).
"""

from __future__ import annotations

import itertools
import os
import signal
import tracemalloc
from pathlib import Path
from types import FrameType

#: Frames kept per traced allocation: enough to see which cache or service a row's
#: allocation was kept by, not only the line that allocated it.
TRACED_FRAMES = 12
SNAPSHOT_SUFFIX = ".tracemalloc"


def snapshot_memory_on_sigusr2(folder: Path | None) -> bool:
    """Trace this process's allocations from now on and write a snapshot on each SIGUSR2
    into `folder` (made 0700 if missing); nothing when `folder` is None. True when set."""
    if folder is None:
        return False
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not tracemalloc.is_tracing():  # PYTHONTRACEMALLOC may have started it, deeper
        tracemalloc.start(TRACED_FRAMES)
    numbers = itertools.count(1)

    def write(signum: int, frame: FrameType | None) -> None:
        path = folder / f"worker-{os.getpid()}-{next(numbers)}{SNAPSHOT_SUFFIX}"
        partial = path.with_name(path.name + ".partial")
        tracemalloc.take_snapshot().dump(str(partial))
        partial.replace(path)  # a reader never sees half a snapshot

    signal.signal(signal.SIGUSR2, write)
    return True
