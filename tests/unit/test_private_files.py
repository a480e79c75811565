"""Files that hold secrets or sealed keys are 0600 in a 0700 folder, whatever the umask."""

from __future__ import annotations

import os
import stat
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
