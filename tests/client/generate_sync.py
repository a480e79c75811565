"""Writes `walletcore_client/_sync.py` from `_async.py` (the one written by hand), so the two
clients cannot drift: `python tests/client/generate_sync.py`. `test_generated.py` checks the
file is current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "walletcore_client"
SOURCE = PACKAGE / "_async.py"
TARGET = PACKAGE / "_sync.py"

#: In order: the longer names first.
REPLACEMENTS = (
    (
        '"""`AsyncClient`: the walletcore API over `httpx.AsyncClient`',
        '"""`Client`: the walletcore API over `httpx.Client`',
    ),
    (
        (
            "`_sync.py` is generated from this file by\n`tests/client/generate_sync.py`; "
            "edit this one and run the script."
        ),
        "Generated from `_async.py` by `tests/client/generate_sync.py`: do not edit.",
    ),
    ("import asyncio\n", "import threading\n"),
    ("asyncio.Lock()", "threading.Lock()"),
    ("await asyncio.sleep(", "time.sleep("),
    ("AsyncGenerator[models.Event, None]", "Generator[models.Event, None, None]"),
    ("AsyncGenerator", "Generator"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("AsyncClient", "Client"),
    ("async def __aenter__", "def __enter__"),
    ("async def __aexit__", "def __exit__"),
    ("aclose", "close"),
    ("async with ", "with "),
    ("async for ", "for "),
    ("async def ", "def "),
    ("await ", ""),
)


def generated() -> str:
    text = SOURCE.read_text()
    for old, new in REPLACEMENTS:
        text = text.replace(old, new)
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


if __name__ == "__main__":
    TARGET.write_text(generated())
