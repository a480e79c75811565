"""Files that hold secrets or sealed keys are 0600 in a 0700 folder, whatever the umask."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from walletcore.secretfiles import operator_secret, private_file, private_folder
from walletcore.settings import Settings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def _loose_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the usual default: 0644 files, 0755 folders
    yield
    os.umask(previous)


def test_a_new_folder_and_file_are_private(tmp_path: Path) -> None:
    secret = private_file(tmp_path / "home" / "a.db")
    assert mode(tmp_path / "home") == 0o700
    assert mode(secret) == 0o600


def test_existing_loose_ones_are_narrowed(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir(mode=0o755)
    loose = folder / "a.db"
    loose.write_bytes(b"x")
    loose.chmod(0o644)
    private_file(loose)
    assert (mode(folder), mode(loose), loose.read_bytes()) == (0o700, 0o600, b"x")
    assert private_folder(folder) == folder


def test_sandbox_secrets_are_private(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    operator_secret(settings, "master_key", "master.key")
    assert mode(tmp_path / "home") == 0o700
    assert mode(tmp_path / "home" / "master.key") == 0o600


async def test_the_sqlite_database_its_wal_and_home_are_private(tmp_path: Path) -> None:
    from sqlalchemy import text

    from walletcore_sql.engine import make_engine, sqlite_url

    home = tmp_path / "home"
    engine = make_engine(sqlite_url(home / "walletcore.db"))
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
            await conn.execute(text("INSERT INTO t VALUES (1)"))
        files = sorted(p.name for p in home.iterdir())
        assert "walletcore.db-wal" in files
        assert {p.name: mode(p) for p in home.iterdir()} == {name: 0o600 for name in files}
        assert mode(home) == 0o700
    finally:
        await engine.dispose()


def test_a_shared_sticky_folder_is_never_narrowed(tmp_path: Path) -> None:
    """A database or secret put straight into a shared folder (`/tmp`) leaves the folder as
    it is: narrowing it would lock every other user out. The file itself is 0600."""
    from walletcore.secretfiles import private_file

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    made = private_file(shared / "walletcore.db")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(made.stat().st_mode) == 0o600


# -- bitcoinlib's folder ---------------------------------------------------------------------
#: What a server's start does with bitcoinlib (the KeyStore's entry point: the folder pinned
#: in the home, the modules imported), what a first /create uses of it, then a record of
#: bitcoinlib's own logger; in a fresh interpreter under the umask given.
BITCOINLIB_START = """
import logging, os, sys
os.umask(int(sys.argv[1], 8))
from walletcore.settings import Settings
from walletcore_chains import bclib
from walletcore_chains.keystore import build
build(settings=Settings(), master_key=bytes(32))
bclib.mnemonic().Mnemonic().generate()
logging.getLogger("bitcoinlib").warning("a record of bitcoinlib's")
"""


def _start_with_bitcoinlib(home: Path, umask: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WALLETCORE_", "BCL_"))}
    env["WALLETCORE_HOME"] = str(home)
    run = subprocess.run(
        [sys.executable, "-c", BITCOINLIB_START, umask],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def loose_modes(root: Path) -> dict[str, str]:
    """Every folder under `root` (itself included) that is not 0700, every file not 0600."""
    found = {}
    for path in [root, *root.rglob("*")]:
        if mode(path) != (0o700 if path.is_dir() else 0o600):
            found[str(path.relative_to(root))] = oct(mode(path))
    return found


@pytest.mark.parametrize("umask", ["000", "022"])
def test_bitcoinlib_folder_is_private_whatever_the_umask(tmp_path: Path, umask: str) -> None:
    home = tmp_path / "home"
    _start_with_bitcoinlib(home, umask)
    folder = home / "bitcoinlib"
    assert {"config.ini", "database", "install.log", "networks.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert loose_modes(home) == {}
    # its own log file is off (its records reach walletcore's logging), so no file of it
    # appears later, at the umask, when it rotates
    assert not (folder / "bitcoinlib.log").exists()
    assert "enable_bitcoinlib_logging = False" in (folder / "config.ini").read_text()


def test_a_loose_bitcoinlib_folder_is_narrowed(tmp_path: Path) -> None:
    """A folder an older version left at 0777 / 0666, with bitcoinlib's log and default
    config in it: narrowed at the next start."""
    home = tmp_path / "home"
    _start_with_bitcoinlib(home, "000")
    folder = home / "bitcoinlib"
    (folder / "bitcoinlib.log").write_text("an older version's log\n")
    shutil.copyfile(Path(bitcoinlib_data(), "config.ini"), folder / "config.ini")
    for path in [home, *home.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    _start_with_bitcoinlib(home, "022")
    assert loose_modes(home) == {}
    assert "enable_bitcoinlib_logging = False" in (folder / "config.ini").read_text()


def bitcoinlib_data() -> Path:
    """bitcoinlib's own data files (the defaults it copies into its folder)."""
    spec = importlib.util.find_spec("bitcoinlib")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "data"
