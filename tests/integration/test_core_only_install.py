"""`pip install walletcore` alone (no extras) runs `examples/embed_core.py`.

No network: the project's wheel is built here, and the clean virtualenv gets exactly the
distributions the core declares (its requirements without extras, and theirs), linked from
this environment. `pip check` proves they satisfy the wheel's metadata; nothing else is on
the path, so an import of an extra's library (sqlalchemy, litestar, web3, ...) fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "embed_core.py"
#: What an extra would bring: none of it may be importable in the clean environment.
EXTRAS_LIBRARIES = ("sqlalchemy", "litestar", "web3", "bitcoinlib", "solders", "msgspec", "nacl")


def _closure(name: str) -> list[str]:
    """The distributions `name` needs without extras, itself excluded, recursively."""
    seen: dict[str, None] = {}
    todo = [(name, frozenset[str]())]
    while todo:
        current, extras = todo.pop()
        for text in distribution(current).requires or []:
            requirement = Requirement(text)
            wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
            if requirement.marker is not None and not any(
                requirement.marker.evaluate(env) for env in wanted
            ):
                continue
            key = re.sub(r"[-_.]+", "-", requirement.name).lower()
            if key == "walletcore":
                continue
            try:
                distribution(key)
            except PackageNotFoundError:
                continue  # an optional platform dependency not installed here
            if key not in seen or requirement.extras:
                seen[key] = None
                todo.append((key, frozenset(requirement.extras)))
    return list(seen)


def _link_distribution(name: str, site: Path) -> None:
    dist = distribution(name)
    base = Path(str(dist.locate_file("")))
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    for top in tops:
        source, target = base / top, site / top
        if source.exists() and not target.exists():
            target.symlink_to(source)


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("core-only")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(where / "wheels"), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    wheel = next((where / "wheels").glob("walletcore-*.whl"))
    env_dir = where / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    for name in _closure("walletcore"):
        _link_distribution(name, site)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-index", "--no-deps", str(wheel)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    checked = subprocess.run(
        [*pip, "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return python


def test_the_clean_environment_has_no_extra(clean_python: Path) -> None:
    for library in EXTRAS_LIBRARIES:
        found = subprocess.run(
            [str(clean_python), "-c", f"import importlib.util as u; print(u.find_spec({library!r}))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert found == "None", f"{library} is importable in the core-only environment"


def test_the_core_alone_creates_a_user_and_sells_and_approves_a_trade(
    clean_python: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WALLETCORE_", "PYTHON"))}
    env["WALLETCORE_HOME"] = str(tmp_path / "home")
    ran = subprocess.run(
        [str(clean_python), str(EXAMPLE)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert any(line.startswith("user ") for line in lines), ran.stdout
    assert any(line.startswith("quote ") and " open " in line for line in lines), ran.stdout
    assert any(line.startswith("approved ") and " completed " in line for line in lines), ran.stdout


def test_an_adapter_of_a_missing_extra_is_named_with_its_extra(
    clean_python: Path, tmp_path: Path
) -> None:
    """The CLI in the core-only environment, on the default settings: the chain plugins'
    and the `sql` storage's libraries are not installed; exit 2 naming the extra to
    install, not a traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WALLETCORE_", "PYTHON"))}
    env["WALLETCORE_HOME"] = str(tmp_path / "home")
    ran = subprocess.run(
        [str(clean_python.parent / "walletcore"), "clients", "list"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "configuration error" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert "pip install 'walletcore[" in ran.stderr, ran.stderr
