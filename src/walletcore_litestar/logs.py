"""Logging for `walletcore serve`: one stderr handler built for a line per request.

`BatchingStderrHandler` formats with a timestamp cached per second and writes lines in
batches (every 0.2 s, or sooner once a batch nears 4 KiB, so a batch stays one atomic pipe
write when several workers share stderr). At thousands of requests a second this halves
what the request log costs against `logging.StreamHandler` (a format with `strftime` and a
write per line). Warnings and errors are written at once; only INFO lines can wait up to
0.2 s (and are lost if the process is killed in that window). Records still go through
`logging`, so an embedder's own handlers work.

`WALLETCORE_LOG_FORMAT=json` gives the handler a `JsonFormatter`: one JSON object a line
with `time`, `level`, `logger`, `message`, and `requestId` when the record was made while a
request was served (`REQUEST_ID`, set by the request middleware, copied onto each record
by `RequestIdFilter`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextvars import ContextVar
from datetime import UTC, datetime

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"  # what the lines look like
#: Largest batch written at once: below PIPE_BUF (4096), so workers' batches never mix.
MAX_BATCH_BYTES = 3584
#: The id of the request this task serves (None outside a request).
REQUEST_ID: ContextVar[str | None] = ContextVar("walletcore_request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Copies the request id being served onto each record (`record.requestId`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "requestId", None) is None:
            record.requestId = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in a message are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, object] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "requestId", None) or REQUEST_ID.get()
        if request_id is not None:
            entry["requestId"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class BatchingStderrHandler(logging.Handler):
    def __init__(self, fd: int = 2, interval: float = 0.2) -> None:
        super().__init__()
        self._fd = fd
        self._interval = interval
        self._lines: list[bytes] = []
        self._size = 0
        self._second = -1
        self._stamp = ""
        self._exceptions = logging.Formatter()
        self._stopping = threading.Event()
        self._flusher = threading.Thread(
            target=self._flush_periodically, name="walletcore-log-flush", daemon=True
        )
        self._flusher.start()

    def emit(self, record: logging.LogRecord) -> None:  # called under self.lock
        try:
            line = self._format(record).encode("utf-8", "backslashreplace")
        except Exception:  # noqa: BLE001 - logging must not raise into the request
            self.handleError(record)
            return
        if self._size + len(line) > MAX_BATCH_BYTES:
            self._write()
        self._lines.append(line)
        self._size += len(line)
        if record.levelno >= logging.WARNING:  # problems are written at once, not batched
            self._write()

    def _format(self, record: logging.LogRecord) -> str:
        if self.formatter is not None:  # a formatter set on the handler (JSON) wins
            return self.formatter.format(record) + "\n"
        second = int(record.created)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        text = f"{self._stamp},{int(record.msecs):03d} {record.levelname} {record.name} {record.getMessage()}"
        if record.exc_info:
            text = f"{text}\n{self._exceptions.formatException(record.exc_info)}"
        return text + "\n"

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write()

    def _write(self) -> None:
        if not self._lines:
            return
        data = b"".join(self._lines)
        self._lines, self._size = [], 0
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            pass  # stderr gone: nothing sensible to do with a log line

    def _flush_periodically(self) -> None:
        while not self._stopping.wait(self._interval):
            self.flush()

    def close(self) -> None:
        self._stopping.set()
        self.flush()
        super().close()
