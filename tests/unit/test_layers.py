"""The layer contracts of `pyproject.toml` (`[tool.importlinter]`) hold: import-linter
builds the import graph of every package and checks each contract (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_every_layer_contract_is_kept() -> None:
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" not in done.stdout.lower().replace("0 broken", ""), done.stdout
    kept = [line for line in done.stdout.splitlines() if line.rstrip().endswith("KEPT")]
    assert len(kept) >= 6, done.stdout  # every contract ran
