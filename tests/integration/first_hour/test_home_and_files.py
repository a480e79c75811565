"""Where the state lives: the same absolute home from any folder, and files others cannot
read (the SQLite database, its -wal and -shm, the sandbox ledger)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from walletcore.clock import SystemClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.settings import Settings, default_home
from walletcore.testing import CONTRACT_CATALOG, autocommit
from walletcore_sql.storage import build


def test_the_default_home_is_the_users_data_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("WALLETCORE_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert default_home() == Path.home() / ".local" / "share" / "walletcore"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_home() == tmp_path / "data" / "walletcore"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")  # ignored, as XDG says
    assert default_home() == Path.home() / ".local" / "share" / "walletcore"


def test_the_home_is_the_same_from_any_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("WALLETCORE_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    homes = set()
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        monkeypatch.chdir(folder)
        homes.add(Settings().home)
    assert homes == {tmp_path / "data" / "walletcore"}
    monkeypatch.setenv("WALLETCORE_HOME", str(tmp_path / "mine"))
    assert Settings().home == tmp_path / "mine"


def test_tests_never_use_the_users_home() -> None:
    # tests/conftest.py gives the run a throwaway home when none is set
    home = Path(os.environ["WALLETCORE_HOME"])
    assert Settings().home == home
    assert not home.resolve().is_relative_to((Path.home() / ".local" / "share").resolve())


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that would leave new files readable by everyone (0644/0755)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
async def test_the_sqlite_files_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    storage = build(settings=Settings(home=home, repo="sql"), clock=SystemClock())
    try:
        await storage.start()
        client = ApiClient(client_id=new_id(), name="modes", key_hash="00" * 32)
        await autocommit(storage).clients.add(client)
        files = [home / "walletcore.db", home / "walletcore.db-wal", home / "walletcore.db-shm"]
        assert all(f.exists() for f in files), sorted(p.name for p in home.iterdir())
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert _mode(home) == 0o700
    finally:
        await storage.aclose()


@pytest.mark.usefixtures("open_umask")
async def test_a_readable_database_left_by_an_older_version_is_narrowed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    (home / "walletcore.db").touch(mode=0o644)
    os.chmod(home / "walletcore.db", 0o644)
    storage = build(settings=Settings(home=home, repo="sql"), clock=SystemClock())
    try:
        await storage.start()
        assert _mode(home / "walletcore.db") == 0o600
        assert _mode(home) == 0o700
    finally:
        await storage.aclose()


@pytest.mark.usefixtures("open_umask")
async def test_the_sandbox_ledger_is_private(tmp_path: Path) -> None:
    from walletcore.domain.assets import Chain
    from walletcore_sandbox.ledger import DATA_FILE, SandboxLedger

    path = tmp_path / "home" / DATA_FILE
    ledger = SandboxLedger(path, SystemClock(), verify=lambda *_: True, catalog=CONTRACT_CATALOG)  # type: ignore[arg-type]
    try:
        await ledger.credit(Chain.ETHEREUM, "0x" + "11" * 20, 2, 10**18, "0x" + "22" * 32)
        for name in (DATA_FILE, DATA_FILE + "-wal", DATA_FILE + "-shm"):
            assert _mode(path.with_name(name)) == 0o600, name
    finally:
        await ledger.aclose()
