"""A JSON document on disk shared by every process of one machine, and its codec.

The sandbox's durable store (the sandbox chain ledger) is one JSON
file under `WALLETCORE_HOME`, read and changed by the server's workers and the operator CLI
at once. `JsonFile` keeps them correct with the standard library only:

- every change is a read-modify-write under an exclusive `fcntl.flock` on a lock file beside
  the data, so two processes cannot lose each other's updates, and a compare-and-set done
  inside `mutate` is real;
- the data file is replaced atomically (temp file, fsync, `os.replace`, fsync of the folder),
  so a reader never sees half a file;
- reads are served from a cache that a `stat` validates (inode, mtime in ns, size): each
  write sets the new file's mtime strictly above the old one's, so two versions never share
  a key and the cheap check is exact.

`encode` / `decode` turn frozen domain dataclasses into plain JSON values and back:
Decimals as strings, datetimes ISO 8601 in UTC, bytes base64, enums by value.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import fcntl
import json
import os
import tempfile
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Generic, TypeVar

S = TypeVar("S")
T = TypeVar("T")


class JsonStoreError(RuntimeError):
    """The data file cannot be used (corrupt, foreign, or of a newer format)."""


# -- codec: frozen domain dataclasses <-> JSON values ---------------------------------------
def encode(value: Any) -> Any:
    """A JSON-ready value: dataclasses as objects, enums by value, Decimals as strings."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, Enum):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        # Kept as UTC, like a database would; the same instant reads back.
        return (value.astimezone(UTC) if value.tzinfo is not None else value).isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(encode(k)): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    raise TypeError(f"cannot store a {type(value).__name__}")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def decode(hint: Any, value: Any) -> Any:
    """The inverse of `encode`, driven by the type hint of the field being read."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        concrete = [a for a in args if a is not type(None)]
        if len(concrete) == 1:
            return decode(concrete[0], value)
        return value  # an untyped union: stored as it came
    if hint is Any or hint is object:
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        kwargs = {
            f.name: decode(hints[f.name], value[f.name])
            for f in dataclasses.fields(hint)
            if f.name in value
        }
        return hint(**kwargs)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if hint is Decimal:
        return Decimal(value)
    if hint is datetime:
        return datetime.fromisoformat(value)
    if hint is bytes:
        return base64.b64decode(value)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        key_hint, value_hint = typing.get_args(hint) or (Any, Any)
        return {_decode_key(key_hint, k): decode(value_hint, v) for k, v in value.items()}
    if origin in (tuple, list):
        args = typing.get_args(hint)
        item = args[0] if args else Any
        items = [decode(item, v) for v in value]
        return tuple(items) if origin is tuple else items
    return value


def _decode_key(hint: Any, key: str) -> Any:
    if hint is int:
        return int(key)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(key)
    return key


_Key = tuple[int, int, int]  # (inode, mtime_ns, size) of one version of the data file


class JsonFile(Generic[S]):
    """One JSON document holding a state `S`, shared by processes through `flock`.

    `load(data, path)` builds the state from the parsed document (raising `error` when it is
    foreign), `dump(state)` gives the document, `empty()` the state of a missing file.
    Writes run in a worker thread (they lock, fsync and rename) so the event loop is not
    blocked by another process holding the lock.
    """

    def __init__(
        self,
        path: Path,
        *,
        load: Callable[[Any, Path], S],
        dump: Callable[[S], Any],
        empty: Callable[[], S],
        error: type[Exception] = JsonStoreError,
    ) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._load_state, self._dump, self._empty, self._error = load, dump, empty, error
        self._thread_lock = threading.Lock()
        self._cache: tuple[_Key, S] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)

    def read(self) -> S:
        """The current state, re-read only when the file changed since the cached version."""
        key = self._stat_key()
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1]
        with self._thread_lock:
            return self._load()

    async def mutate(self, change: Callable[[S], tuple[S | None, T]]) -> T:
        """Apply `change` to the current state under the lock; a new state (not None) is
        written. Returns what `change` returned beside it."""
        return await asyncio.to_thread(self._mutate_now, change)

    def _mutate_now(self, change: Callable[[S], tuple[S | None, T]]) -> T:
        with self._thread_lock, FileLock(self.lock_path):
            current = self._load()
            new_state, result = change(current)
            if new_state is not None:
                self._write(new_state)
            return result

    def _load(self) -> S:
        """Re-read the file if it changed (caller holds the thread lock)."""
        for _ in range(5):
            key = self._stat_key()
            cached = self._cache
            if cached is not None and cached[0] == key:
                return cached[1]
            if key == (0, 0, 0):
                state = self._empty()
            else:
                try:
                    raw = self.path.read_bytes()
                except FileNotFoundError:  # replaced between stat and open: look again
                    continue
                try:
                    state = self._load_state(json.loads(raw), self.path)
                except self._error:
                    raise
                except (ValueError, KeyError, TypeError) as exc:
                    raise self._error(f"{self.path} is corrupt: {type(exc).__name__}") from None
            # Trust the version only if the file did not change while it was read.
            if self._stat_key() == key:
                self._cache = (key, state)
            return state
        raise self._error(f"{self.path} keeps changing; cannot read a stable version")

    def _stat_key(self) -> _Key:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _write(self, state: S) -> None:
        """Replace the data file atomically, its mtime strictly above the old one's."""
        previous = self._stat_key()
        data = json.dumps(self._dump(state), separators=(",", ":")).encode("utf-8")
        folder = self.path.parent
        fd, tmp_name = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp_name, 0o600)
            stamp = max(time.time_ns(), previous[1] + 1)
            os.utime(tmp_name, ns=(stamp, stamp))
            # A filesystem with coarse timestamps rounds the stamp: step until it is above.
            while os.stat(tmp_name).st_mtime_ns <= previous[1]:
                stamp += 1_000_000
                os.utime(tmp_name, ns=(stamp, stamp))
            os.replace(tmp_name, self.path)
        except BaseException:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
            raise
        _fsync_dir(folder)
        self._cache = (self._stat_key(), state)


class FileLock:
    """An exclusive `flock` on a lock file, held for one read-modify-write."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> None:
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *_: object) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["FileLock", "JsonFile", "JsonStoreError", "decode", "encode"]
