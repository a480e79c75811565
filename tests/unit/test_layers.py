"""The static contracts of `pyproject.toml` hold (docs/architecture.md):
- the layer contracts (`[tool.importlinter]`): import-linter builds the import graph of
  every package and checks each contract;
- the types (`[tool.mypy]`, strict): a framework others extend by its ports and plugins,
  whose signatures are the contract they code against."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONFIG = str(ROOT / "pyproject.toml")


def _checked(*command: str) -> str:
    """The checker's output; it must exit 0."""
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_every_layer_contract_is_kept() -> None:
    out = _checked(str(LINT_IMPORTS), "--config", CONFIG, "--no-cache")
    assert "broken" not in out.lower().replace("0 broken", ""), out
    kept = [line for line in out.splitlines() if line.rstrip().endswith("KEPT")]
    assert len(kept) >= 6, out  # every contract ran


def test_src_type_checks_strictly(tmp_path: Path) -> None:
    out = _checked(
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        CONFIG,
        "--cache-dir",
        str(tmp_path / "cache"),
        "src",
    )
    assert out.startswith("Success: no issues found"), out
