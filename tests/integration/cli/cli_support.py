"""What the CLI tests share: running one command in process, and reading the audit log of
a home the way an operator would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from walletcore.container import create_container
from walletcore.domain.audit import AuditEntry
from walletcore.settings import Settings
from walletcore_cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> Any:
    """Run one command; its JSON on success, its stderr on a refusal."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == status, captured.err
    return json.loads(captured.out) if status == 0 else captured.err


def audit_log(home: Path) -> list[AuditEntry]:
    """The newest 1,000 entries of the home's audit log, newest first."""

    async def newest() -> list[AuditEntry]:
        storage = create_container(Settings(home=home)).storage()
        try:
            async with storage.read() as unit:
                return await unit.audit.newest(1000)
        finally:
            await storage.aclose()

    return asyncio.run(newest())
