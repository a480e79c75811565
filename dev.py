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
import shutil
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
#: A real `bitcoind` for the Bitcoin gateway's regtest tests (tests/integration/bitcoin),
#: cached here; `walletcore_chains.testing.bitcoind` finds it. Installed from Debian's
#: development suite (Bitcoin Knots, a Core fork) by the recipe in `install_bitcoind`.
BITCOIND_DIR = VENV / "bitcoind"
#: tronweb (npm), the independent check of the TRON gateway's txIDs and signatures
#: (tests/integration/tron), cached here; the tests find it there.
TRONWEB_DIR = VENV / "tronweb"


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


def install_bitcoind() -> None:
    """Put bitcoind under `.venv/bitcoind` when it is missing (about 15 s, once): Debian's
    development suite ships Bitcoin Knots 29 (no Bitcoin Core package exists for this
    Debian); it needs a newer C library than the system's, so it runs through that suite's
    own loader unpacked beside it. Nothing changes on the system but three runtime
    libraries (libevent, libzmq, libsqlite3) installed with apt when root. A failure is
    reported, not fatal: the Bitcoin regtest tests then skip, saying why."""
    binary = BITCOIND_DIR / "bitcoind"
    if binary.exists() or os.environ.get("WALLETCORE_BITCOIND"):
        return
    print(f"dev.py: installing bitcoind (regtest tests) into {BITCOIND_DIR}", file=sys.stderr)
    script = r"""
set -eu
DEST=$1
URI=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$URI" ] || URI=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$URI" ] || { echo "no Debian mirror configured in /etc/apt" >&2; exit 1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/lists/partial" "$W/cache/archives/partial" "$W/debs"
echo "deb [trusted=yes] $URI sid main" > "$W/sources.list"
O="-o Dir::Etc::sourcelist=$W/sources.list -o Dir::Etc::sourceparts=/nonexistent -o Dir::State::Lists=$W/lists -o Dir::Cache=$W/cache -o APT::Sandbox::User=root"
apt-get $O -qq update
(cd "$W/debs" && apt-get $O -qq download bitcoin-knots libc6 libstdc++6 libgcc-s1)
if [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libevent-2.1-7 libevent-extra-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 libzmq5 libsqlite3-0 >/dev/null
fi
R="$DEST/root"; rm -rf "$R"; mkdir -p "$R"
for d in "$W"/debs/*.deb; do dpkg-deb -x "$d" "$R"; done
for b in bitcoind bitcoin-cli; do
  printf '#!/bin/sh\nexec %s/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path %s/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu %s/usr/bin/%s "$@"\n' "$R" "$R" "$R" "$b" > "$DEST/$b.new"
  chmod +x "$DEST/$b.new"
done
"$DEST/bitcoind.new" -version | head -1
mv "$DEST/bitcoin-cli.new" "$DEST/bitcoin-cli"; mv "$DEST/bitcoind.new" "$DEST/bitcoind"
"""
    BITCOIND_DIR.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["sh", "-c", script, "sh", str(BITCOIND_DIR)], check=False)
    if result.returncode != 0:
        print(
            "dev.py: bitcoind could not be installed; the Bitcoin regtest tests will skip "
            "(set WALLETCORE_BITCOIND to a bitcoind binary to run them)",
            file=sys.stderr,
        )


def install_tronweb() -> None:
    """Put tronweb under `.venv/tronweb` when it is missing (npm, a few seconds, once). A
    failure is reported, not fatal: the tronweb cross-checks then skip, saying why."""
    if (TRONWEB_DIR / "node_modules" / "tronweb").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        print("dev.py: no npm; the tronweb cross-checks will skip", file=sys.stderr)
        return
    print(f"dev.py: installing tronweb (TRON tests) into {TRONWEB_DIR}", file=sys.stderr)
    TRONWEB_DIR.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
        "install",
        "--silent",
        "--no-audit",
        "--no-fund",
        "--prefix",
        str(TRONWEB_DIR),
        "tronweb@6",
    ]
    if subprocess.run(command, check=False).returncode != 0:
        print("dev.py: tronweb could not be installed; its cross-checks will skip", file=sys.stderr)


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
        install_bitcoind()
        install_tronweb()
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
