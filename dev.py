#!/usr/bin/env python3
"""Set-up and run walletcore from a fresh clone with only Python 3.11+.

    python3 dev.py serve [walletcore serve options]   # the service, sandbox profile
    python3 dev.py test  [pytest options]             # the whole test suite
    python3 dev.py walletcore ...                     # any operator CLI command

Creates `.venv` beside this file and installs the project into it, and for `test` the
test packages under tests/plugins (again only when a pyproject.toml changed), one run at
a time (a lock file, `.venv.lock`: a second run waits, then finds the work done). Then
it becomes the command (exec), so signals reach the command itself: SIGTERM to
`dev.py serve` stops the server. `test` without a PostgreSQL (no
WALLETCORE_TEST_DATABASE_URL, nothing on 127.0.0.1:5432) runs the tests against a
throwaway embedded one (`walletcore_sql.embedded`), deleted afterwards. Standard library
only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
#: Held while .venv is created or installed into (fcntl.flock): runs at once take turns.
LOCK = ROOT / ".venv.lock"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
EXTRAS = {"serve": "all", "walletcore": "all", "test": "all,test"}
#: Packages of the tests, installed after the project with the `test` extra: a third
#: party's chain plugin (tests/integration/http/test_http_chain_plugins.py) and a third
#: party's EVM chain of its own (tests/integration/http/test_http_new_chain.py).
TEST_PACKAGES = (
    ROOT / "tests" / "plugins" / "walletcore_testchain",
    ROOT / "tests" / "plugins" / "walletcore_l2chain",
)
#: A real `bitcoind` for the Bitcoin gateway's regtest tests (tests/integration/bitcoin),
#: cached here; `walletcore_chains.testing.bitcoind` finds it. Installed from Debian's
#: development suite (Bitcoin Knots, a Core fork) by the recipe in `install_bitcoind`.
BITCOIND_DIR = VENV / "bitcoind"
#: tronweb (npm), the independent check of the TRON gateway's txIDs and signatures
#: (tests/integration/tron), cached here; the tests find it there.
TRONWEB_DIR = VENV / "tronweb"
#: anvil (npm `@foundry-rs/anvil-linux-amd64`), a real EVM node with a mempool for the EVM
#: gateway's tests and the production smoke test (`walletcore_chains.testing.anvil`).
ANVIL_DIR = VENV / "anvil"
ANVIL_PACKAGE = "@foundry-rs/anvil-linux-amd64"
#: The test database: this URL when set, else a server on this address when one answers,
#: else an embedded one started for the run (`walletcore_sql.testing.pg_test_url`).
TEST_DATABASE_URL_ENV = "WALLETCORE_TEST_DATABASE_URL"
DEFAULT_POSTGRES = ("127.0.0.1", 5432)


def say(message: str) -> None:
    print(f"dev.py: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def venv_lock() -> Iterator[None]:
    """One dev.py at a time creates or installs into .venv; the others wait here."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    with LOCK.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another dev.py is setting up {VENV}; waiting for it ({LOCK})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _extra_packages(extras: str) -> tuple[Path, ...]:
    return TEST_PACKAGES if "test" in extras.split(",") else ()


def _digest(extras: str) -> str:
    manifests = b"".join(p.joinpath("pyproject.toml").read_bytes() for p in _extra_packages(extras))
    project = (ROOT / "pyproject.toml").read_bytes()
    return hashlib.sha256(project + manifests + extras.encode()).hexdigest()


def installed(extras: str) -> bool:
    """Whether .venv has the project with `extras` as the pyproject files now say."""
    stamp = VENV / ".walletcore-installed"
    return (
        (BIN / "python").exists()
        and stamp.exists()
        and _digest(extras) in stamp.read_text().split()
    )


def ensure_env(extras: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs on any python3
        sys.exit(f"walletcore needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if installed(extras):
        return
    extra_packages = _extra_packages(extras)
    stamp = VENV / ".walletcore-installed"
    with venv_lock():
        # Again under the lock: a run we waited for may have done it all.
        if installed(extras):
            return
        steps = 3 + len(extra_packages)
        if not (BIN / "python").exists():
            say(f"creating {VENV}")
            venv.EnvBuilder(with_pip=True).create(VENV)
        pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check"]
        say(f"[1/{steps}] upgrading pip")
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
        say(f"[2/{steps}] installing walletcore[{extras}] into {VENV} (a minute or two, once)")
        subprocess.run([*pip, "install", "-e", f"{ROOT}[{extras}]"], check=True)
        for number, package in enumerate(extra_packages, start=3):
            say(f"[{number}/{steps}] installing {package.relative_to(ROOT)}")
            subprocess.run([*pip, "install", "-q", "-e", str(package)], check=True)
        say(f"[{steps}/{steps}] checking the resolved versions")
        check_resolution()
        previous = stamp.read_text().split() if stamp.exists() else []
        stamp.write_text("\n".join([*previous, _digest(extras)]) + "\n")
        say("installed")


def postgres_configured(
    environ: Mapping[str, str] | None = None, address: tuple[str, int] | None = None
) -> bool:
    """Whether the tests have a PostgreSQL: the URL is set, or a server answers at
    `address` (DEFAULT_POSTGRES)."""
    if (os.environ if environ is None else environ).get(TEST_DATABASE_URL_ENV):
        return True
    try:
        with socket.create_connection(address or DEFAULT_POSTGRES, timeout=1):
            return True
    except OSError:
        return False


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


def install_npm(package: str, where: Path, marker: Path, purpose: str) -> None:
    """Put the npm `package` under `where` when `marker` is missing (a few seconds, once). A
    failure is reported, not fatal: the tests that need it then skip, saying why."""
    if marker.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        say(f"no npm; the {purpose} will skip")
        return
    say(f"installing {package} ({purpose}) into {where}")
    where.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(where),
               package]  # fmt: skip
    if subprocess.run(command, check=False).returncode != 0:
        say(f"{package} could not be installed; the {purpose} will skip")


def install_tronweb() -> None:
    """tronweb, the independent check of the TRON gateway's txIDs and signatures."""
    marker = TRONWEB_DIR / "node_modules" / "tronweb"
    install_npm("tronweb@6", TRONWEB_DIR, marker, "tronweb cross-checks")


def install_anvil() -> None:
    """anvil, Foundry's EVM node with a mempool (the npm package ships the binary)."""
    marker = ANVIL_DIR / "node_modules" / ANVIL_PACKAGE / "bin" / "anvil"
    install_npm(f"{ANVIL_PACKAGE}@1", ANVIL_DIR, marker, "tests on anvil")


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
    python = str(BIN / "python")
    if command == "test":
        with venv_lock():  # both write under .venv
            install_bitcoind()
            install_tronweb()
            install_anvil()
        # Both cores (pytest-xdist), one test file per worker at a time; `-n 0` runs serially.
        parallel = [] if any(a.startswith(("-n", "--numprocesses")) for a in rest) else PARALLEL
        args = [python, "-m", "pytest", *parallel, *rest]
        if not postgres_configured():
            # Starts the server, runs pytest, stops and deletes the server (also on
            # Ctrl-C or SIGTERM, which it passes on to pytest).
            args = [python, "-m", "walletcore_sql.embedded", "--", *args]
    elif command == "serve":
        args = [str(BIN / "walletcore"), "serve", *rest]
    else:
        args = [str(BIN / "walletcore"), *rest]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # no exec there: run it and pass its status on
        return subprocess.call(args)
    os.execv(args[0], args)  # this process becomes the command: signals reach it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
