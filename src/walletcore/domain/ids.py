"""24-hex identifiers (user, trade, api client ids)."""

from __future__ import annotations

import os
import re
from typing import Any

from walletcore.domain.errors import InvalidRequest
from walletcore.domain.wire import JsonValue

_ID_RE = re.compile(r"\A[0-9a-f]{24}\Z")


#: Ids drawn from the OS's CSPRNG at once, then handed out one by one (`new_id`).
ID_BATCH = 128
_drawn: list[str] = []


def new_id() -> str:
    """A fresh 24-hex id (96 random bits from the OS's CSPRNG).

    Drawn `ID_BATCH` at a time (one `os.urandom` of 12 x 128 bytes), then handed out: a
    system call per id was about 4 % of the process's CPU in the write path bench, three
    ids a sell + approve (docs/performance.md, "Fewer Python calls per request").
    `list.pop` hands each out once, from any thread; a child process starts with none
    drawn (`os.register_at_fork`), so it never repeats its parent's. Ids are names, not
    secrets: nothing is derived from them, and they are on the wire anyway."""
    while True:
        try:
            return _drawn.pop()
        except IndexError:  # none left (other threads may take a new draw first: again)
            _draw()


def _draw() -> None:
    block = os.urandom(12 * ID_BATCH).hex()
    _drawn.extend([block[start : start + 24] for start in range(0, len(block), 24)])


os.register_at_fork(after_in_child=_drawn.clear)


def is_id(value: Any) -> bool:
    return isinstance(value, str) and _ID_RE.match(value) is not None


def parse_id(value: JsonValue, field: str) -> str:
    """A 24-hex id; upper case is accepted and normalised to lower case."""
    if value is None or value == "":
        raise InvalidRequest(f"{field} is required")
    if isinstance(value, str):
        lowered = value.lower()
        if _ID_RE.match(lowered):
            return lowered
    raise InvalidRequest(f"{field} must be a 24-character hex string")
