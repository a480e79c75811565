"""Pins bitcoinlib's data directory before bitcoinlib is first imported, then imports it.

bitcoinlib reads `BCL_DATA_DIR` when it is imported and writes a config, a log and an empty
database directory there; unset, that is `~/.bitcoinlib`. We set it to a folder inside
`WALLETCORE_HOME` (or a private temporary folder) first, and use only its key, address,
transaction, mnemonic and encoding classes: never its `Wallet`, which stores private keys
unencrypted, and never `Transaction.sign` (the KeyStore signs; see bitcoin/txcodec.py).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from types import ModuleType

from walletcore.secretfiles import private_folder

log = logging.getLogger("walletcore_chains.bclib")

ENV = "BCL_DATA_DIR"
_import_lock = threading.Lock()


def configure(home: Path | str) -> Path:
    """Point bitcoinlib at `home/bitcoinlib`, unless a data directory was chosen already.

    An explicit `BCL_DATA_DIR` (the deployer's choice, or a test's) is kept.
    """
    chosen = os.environ.get(ENV)
    if not chosen:
        target = private_folder((Path(home).expanduser() / "bitcoinlib").resolve())
        os.environ[ENV] = chosen = str(target)
    _warn_if_imported_elsewhere()
    return Path(chosen)


def _ensure_configured() -> None:
    if os.environ.get(ENV):
        return
    home = os.environ.get("WALLETCORE_HOME")
    if home:
        configure(home)
    else:  # never the user's home directory: a private folder of our own
        os.environ[ENV] = tempfile.mkdtemp(prefix="walletcore-bitcoinlib-")


def _warn_if_imported_elsewhere() -> None:
    config = sys.modules.get("bitcoinlib.config.config")
    if config is None:
        return
    used = str(getattr(config, "BCL_DATA_DIR", ""))
    if used and used != os.environ.get(ENV):
        log.warning("bitcoinlib was imported before walletcore pinned its data directory")


def keys() -> ModuleType:
    """`bitcoinlib.keys`, imported on first use with the data directory pinned."""
    return _load("bitcoinlib.keys")


def encoding() -> ModuleType:
    """`bitcoinlib.encoding` (bech32 / bech32m), imported on first use with the data directory
    pinned."""
    return _load("bitcoinlib.encoding")


def transactions() -> ModuleType:
    """`bitcoinlib.transactions` (its `Transaction` class only: built, hashed, serialised;
    never signed with a key of its own), imported on first use with the data directory
    pinned."""
    return _load("bitcoinlib.transactions")


def mnemonic() -> ModuleType:
    """`bitcoinlib.mnemonic`, imported on first use with the data directory pinned."""
    return _load("bitcoinlib.mnemonic")


def _load(name: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None:
        return module
    with _import_lock:  # callers run in worker threads; import (and filter warnings) once
        _ensure_configured()
        with warnings.catch_warnings():
            # bitcoinlib's package import loads its SQLAlchemy models, written against APIs
            # SQLAlchemy 2 deprecates; we never use them, so their warnings are noise.
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"bitcoinlib\.")
            return importlib.import_module(name)
