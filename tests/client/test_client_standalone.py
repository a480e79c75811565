"""`walletcore_client` needs only httpx: it imports and builds its clients in an interpreter
where walletcore's packages, pydantic and litestar cannot be imported; `_sync.py` is the
current output of `generate_sync.py`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from generate_sync import TARGET, generated

SRC = Path(__file__).resolve().parents[2] / "src"

PROGRAM = textwrap.dedent(
    """
    import sys

    class Blocked:
        names = ("walletcore", "pydantic", "pydantic_settings", "litestar", "msgspec")

        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in self.names or (top.startswith("walletcore_") and top != "walletcore_client"):
                raise ImportError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Blocked())
    import walletcore_client
    from walletcore_client import AsyncClient, Client

    client = Client("http://127.0.0.1:9", "a" * 24, "wck_secret-key")
    client.close()
    print(repr(client))
    print(type(AsyncClient("http://127.0.0.1:9", "a" * 24, "wck_secret-key")).__name__)
    loaded = sorted(m.split(".")[0] for m in sys.modules)
    print(",".join(sorted(set(loaded) & {"walletcore", "pydantic", "litestar"})) or "none")
    """
)


def test_the_client_imports_with_httpx_alone() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown, kind, loaded = done.stdout.splitlines()
    assert "wck_secret-key" not in shown and "Client(base_url=" in shown
    assert kind == "AsyncClient" and loaded == "none"


def test_the_sync_client_is_generated_from_the_async_one() -> None:
    assert TARGET.read_text() == generated(), "run: python tests/client/generate_sync.py"
