"""The interpreter's recursion limit, pinned: a C stack overflow must stay impossible.

Some chain libraries raise the limit for the whole process when imported (py_ecc, under
eth_account, sets 100,000; py-evm 12,288). C code that recurses per nesting level (JSON
decoders, `repr`, pickling) checks that limit before the C stack runs out, so with it raised
a deep enough input crashes the worker (SIGSEGV) instead of raising `RecursionError`.

The binding therefore imports those libraries at start-up, sets the limit back, and checks
it again on every request (one C call), so a library imported lazily later cannot leave it
raised for the next request. Request bodies are also refused past `bodies.MAX_JSON_DEPTH`
before any decoder runs; this is the second wall.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys

log = logging.getLogger("walletcore.http")

#: CPython's default; deep enough for every code path of the service.
RECURSION_LIMIT = 1000
#: Imported at start-up when installed: they raise the limit on import.
RAISING_MODULES = ("py_ecc", "eth_account")


def preload_chain_libraries() -> None:
    """Import the libraries that raise the limit now, not on a first request."""
    for name in RAISING_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


def pin_recursion_limit() -> None:
    """Set the limit back to `RECURSION_LIMIT` if anything raised it."""
    if sys.getrecursionlimit() != RECURSION_LIMIT:
        log.debug(
            "recursion limit was %d; set back to %d", sys.getrecursionlimit(), RECURSION_LIMIT
        )
        sys.setrecursionlimit(RECURSION_LIMIT)
