"""An opt-in look at a server worker's memory: `tracemalloc` snapshots written on SIGUSR2.

With `WALLETCORE_MEMORY_SNAPSHOTS=<folder>` (`OperationsSettings.memory_snapshots`), each
`walletcore serve` worker answers `kill -USR2 <worker pid>`: the first signal starts
`tracemalloc`, each later one writes what it traced to
`<folder>/worker-<pid>-<n>.tracemalloc` (the n-th snapshot of that worker;
`tracemalloc.Snapshot.load` reads it). Two snapshots of the same worker taken minutes apart
under load, compared (`Snapshot.compare_to`), name the lines whose allocations grew
(`bench/memory_bench.py --tracemalloc`, docs/performance.md, "Memory per worker").

Nothing is traced before the first signal, so the setting costs nothing until then (a
worker that traced from its start took over a minute to import its chain libraries on a
busy machine). Once tracing, every allocation is slower and recorded: for diagnosis only.
A snapshot holds file names, line numbers and sizes, never a value. It is written from the
signal's handler, on the worker's event loop thread, which it holds for as long as the
file takes to write (about a second for a worker under load).
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
    """On SIGUSR2: start tracing this process's allocations the first time, write a snapshot
    into `folder` (made 0700 if missing) each later time; nothing when `folder` is None.
    True when set."""
    if folder is None:
        return False
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    numbers = itertools.count(1)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not tracemalloc.is_tracing():  # PYTHONTRACEMALLOC may have started it already
            tracemalloc.start(TRACED_FRAMES)
            return
        path = folder / f"worker-{os.getpid()}-{next(numbers)}{SNAPSHOT_SUFFIX}"
        partial = path.with_name(path.name + ".partial")
        tracemalloc.take_snapshot().dump(str(partial))
        partial.replace(path)  # a reader never sees half a snapshot

    signal.signal(signal.SIGUSR2, on_signal)
    return True
