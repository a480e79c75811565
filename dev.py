#!/usr/bin/env python3
"""Set-up and run walletcore from a fresh clone with only Python 3.11+.

    python3 dev.py serve [walletcore serve options]   # the service, sandbox profile
    python3 dev.py test  [pytest options]             # the whole test suite
    python3 dev.py walletcore ...                     # any operator CLI command

Creates `.venv` beside this file and installs the project into it, and for `test` the
test packages under tests/plugins (again only when a pyproject.toml changed). Standard
library only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
EXTRAS = {"serve": "all", "walletcore": "all", "test": "all,test"}
#: Packages of the tests, installed after the project with the `test` extra: a third
#: party's chain plugin (tests/integration/http/test_http_chain_plugins.py).
TEST_PACKAGES = (ROOT / "tests" / "plugins" / "walletcore_testchain",)


def ensure_env(extras: str) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"walletcore needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not (BIN / "python").exists():
        print(f"dev.py: creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    extra_packages = TEST_PACKAGES if "test" in extras.split(",") else ()
    manifests = b"".join(p.joinpath("pyproject.toml").read_bytes() for p in extra_packages)
    digest = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + manifests + extras.encode()
    ).hexdigest()
    stamp = VENV / ".walletcore-installed"
    if stamp.exists() and digest in stamp.read_text().split():
        return
    print(f"dev.py: installing walletcore[{extras}] into {VENV}", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-q", "-e", f"{ROOT}[{extras}]"], check=True)
    for package in extra_packages:
        subprocess.run([*pip, "install", "-q", "-e", str(package)], check=True)
    check_resolution()
    previous = stamp.read_text().split() if stamp.exists() else []
    stamp.write_text("\n".join([*previous, digest]) + "\n")


def check_resolution() -> None:
    """Refuse a resolver fallback to an ancient tronpy (see pyproject's pins)."""
    code = (
        "from importlib.metadata import version as v\n"
        "t = tuple(int(x) for x in v('tronpy').split('.')[:2])\n"
        "assert t >= (0, 6), 'tronpy ' + v('tronpy') + ' resolved; 0.6 or newer is required'\n"
    )
    subprocess.run([str(BIN / "python"), "-c", code], check=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    ensure_env(EXTRAS[command])
    os.chdir(ROOT)
    if command == "test":
        # Both cores (pytest-xdist), one test file per worker at a time; `-n 0` runs serially.
        parallel = [] if any(a.startswith(("-n", "--numprocesses")) for a in rest) else PARALLEL
        args = [str(BIN / "python"), "-m", "pytest", *parallel, *rest]
    elif command == "serve":
        args = [str(BIN / "walletcore"), "serve", *rest]
    else:
        args = [str(BIN / "walletcore"), *rest]
    return subprocess.call(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
