"""Pins bitcoinlib's data directory before bitcoinlib is first imported, keeps that folder
private, then imports it: once, whichever thread asks first.

bitcoinlib reads `BCL_DATA_DIR` when it is imported and writes there: a `config.ini`, copies
of its network and provider files, an `install.log`, an empty `database` folder and, unless
its config says not to, a rotating `bitcoinlib.log`; unset, that is `~/.bitcoinlib`. We set
it to a folder inside `WALLETCORE_HOME` (or a private temporary folder) first. The folder is
0700 and its files 0600 whatever the process's umask: a `config.ini` of ours turns the log
file off first (its records still reach the `bitcoinlib` logger, so walletcore's logging),
the import runs under a 077 umask, and what is there afterwards is narrowed (a folder an
older version made). We use only its key, address, transaction, mnemonic and encoding
classes: never its `Wallet`, which stores private keys unencrypted, and never
`Transaction.sign` (the KeyStore signs; see bitcoin/txcodec.py).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from walletcore.secretfiles import private_file, private_folder

log = logging.getLogger("walletcore_chains.bclib")

ENV = "BCL_DATA_DIR"
#: The modules walletcore uses (`preload` imports them all).
MODULES = (
    "bitcoinlib.encoding",
    "bitcoinlib.mnemonic",
    "bitcoinlib.keys",
    "bitcoinlib.transactions",
)
#: bitcoinlib's `config.ini` in its data directory: no log file of its own (a duplicate of
#: what its logger already hands to ours, and one whose rotation would create files at the
#: process's umask).
CONFIG = "[logs]\nenable_bitcoinlib_logging = False\n"
_PRIVATE_UMASK = 0o077

_import_lock = threading.Lock()
#: Modules whose import has completed: read without the lock, filled under it. Never
#: `sys.modules`, which holds a module from the moment its import starts: another thread
#: would be handed a partially initialised one.
_loaded: dict[str, ModuleType] = {}


def configure(home: Path | str) -> Path:
    """Point bitcoinlib at `home/bitcoinlib`, unless a data directory was chosen already.

    An explicit `BCL_DATA_DIR` (the deployer's choice, or a test's) is kept.
    """
    chosen = os.environ.get(ENV)
    if not chosen:
        # the home first: made as a parent, it would take the umask's mode
        home = private_folder(Path(home).expanduser().resolve())
        target = private_folder(home / "bitcoinlib")
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


def preload() -> None:
    """Import every module walletcore uses now (the KeyStore's start-up), so that no
    request pays for the import (most of a second) or waits on another's."""
    for name in MODULES:
        _load(name)


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
    module = _loaded.get(name)
    if module is not None:
        return module
    with _import_lock:  # callers run in worker threads; import (and filter warnings) once
        module = _loaded.get(name)
        if module is None:
            module = _loaded[name] = _import(name)
        return module


def _import(name: str) -> ModuleType:
    """`name` imported; bitcoinlib's first import in this process (the one that writes its
    data directory) with the folder made private before and after."""
    folder = None if _loaded else _data_directory()
    with warnings.catch_warnings(), _private_umask():
        # bitcoinlib's package import loads its SQLAlchemy models, written against APIs
        # SQLAlchemy 2 deprecates; we never use them, so their warnings are noise.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"bitcoinlib\.")
        module = importlib.import_module(name)
    if folder is not None:
        _close_log_file()
        _write_config(folder)  # its first import copies its default config over ours
        _narrow(folder)
    return module


def _data_directory() -> Path:
    _ensure_configured()
    folder = private_folder(Path(os.environ[ENV]).expanduser())
    _write_config(folder)
    return folder


def _write_config(folder: Path) -> None:
    """Our `config.ini`, replaced in one step: another process may be reading it."""
    temporary = private_file(folder / f".config.ini.{os.getpid()}.{threading.get_ident()}")
    temporary.write_text(CONFIG, encoding="ascii")
    os.replace(temporary, folder / "config.ini")


@contextmanager
def _private_umask() -> Iterator[None]:
    """What bitcoinlib creates meanwhile is 0700 / 0600. The umask is the process's: a file
    another thread creates meanwhile is as private (never looser)."""
    previous = os.umask(_PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def _close_log_file() -> None:
    """No file handler on bitcoinlib's logger: one process may have read bitcoinlib's default
    config (copied over ours by another's first import) and opened its log file."""
    logger = logging.getLogger("bitcoinlib")
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler):
            logger.removeHandler(handler)
            handler.close()


def _narrow(folder: Path) -> None:
    """Every folder under `folder` 0700 and every file 0600 (symbolic links left alone)."""
    for root, folders, files in os.walk(folder):
        for name in folders:
            if not Path(root, name).is_symlink():
                private_folder(Path(root, name))
        for name in files:
            if not Path(root, name).is_symlink():
                private_file(Path(root, name))
