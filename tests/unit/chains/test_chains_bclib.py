"""bitcoinlib imported once, whichever thread asks first: no thread is ever handed a module
another thread is still importing (a partially initialised one, without its classes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: Each loader of `walletcore_chains.bclib` -> what walletcore uses of its module.
USED = {
    "keys": "Key",
    "encoding": "addr_bech32_to_pubkeyhash",
    "transactions": "Transaction",
    "mnemonic": "Mnemonic",
}
THREADS_PER_LOADER = 4

#: In a fresh interpreter: threads ask the loaders over and over until the module they get
#: has what walletcore uses; every module handed out without it is printed.
CONCURRENT_FIRST_USE = """
import sys, threading
from walletcore_chains import bclib

used, per_loader = {used!r}, {per_loader}
partial = []

def ask(loader, attribute):
    while not hasattr(module := getattr(bclib, loader)(), attribute):
        partial.append(module.__name__)

threads = [threading.Thread(target=ask, args=item) for item in list(used.items()) * per_loader]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(",".join(sorted(set(partial))))
"""


def test_concurrent_first_use_never_sees_a_partial_module(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}
    env["BCL_DATA_DIR"] = str(tmp_path / "bitcoinlib")
    code = CONCURRENT_FIRST_USE.format(used=USED, per_loader=THREADS_PER_LOADER)
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "", f"handed out before their import completed: {run.stdout}"
