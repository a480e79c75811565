"""24-hex identifiers (user, trade, api client ids)."""

from __future__ import annotations

import os
import re
from typing import Any

from walletcore.domain.errors import InvalidRequest

_ID_RE = re.compile(r"\A[0-9a-f]{24}\Z")


def new_id() -> str:
    """A fresh 24-hex id (96 random bits from the OS's CSPRNG).

    `secrets.token_hex(12)` is this same `os.urandom(12).hex()` behind three Python calls;
    every quote and every audit entry makes one (docs/performance.md, item 31)."""
    return os.urandom(12).hex()


def is_id(value: Any) -> bool:
    return isinstance(value, str) and _ID_RE.match(value) is not None


def parse_id(value: Any, field: str) -> str:
    """A 24-hex id; upper case is accepted and normalised to lower case."""
    if value is None or value == "":
        raise InvalidRequest(f"{field} is required")
    if isinstance(value, str):
        lowered = value.lower()
        if _ID_RE.match(lowered):
            return lowered
    raise InvalidRequest(f"{field} must be a 24-character hex string")
