"""The `expire_approvals` job of the withdrawal policies: listed with its period
(`WALLETCORE_JOBS_APPROVALS_SECONDS`, 60 s) and registered by procrastinate's app. What a
run does is held to the core's fakes (tests/unit/services/test_policies.py) and to the
storage contract's `due_approvals` on SQLite and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from walletcore.container import create_container
from walletcore.settings import Settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


def test_the_jobs_list_the_expiry_and_its_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def periods() -> dict[str, float]:
        container = create_container(Settings(home=tmp_path, repo="memory"))
        return {j.name: j.every_seconds for j in container.jobs().periodic()}

    assert periods()["expire_approvals"] == 60.0
    monkeypatch.setenv("WALLETCORE_JOBS_APPROVALS_SECONDS", "10")
    assert periods()["expire_approvals"] == 10.0


async def test_a_run_on_an_empty_store_ends_nothing(tmp_path: Path) -> None:
    container = create_container(Settings(home=tmp_path, repo="memory"))
    assert await container.jobs().expire_approvals() == 0


def test_procrastinate_runs_the_expiry_every_minute(tmp_path: Path) -> None:
    from walletcore_jobs.app import make_app

    settings = Settings(
        home=tmp_path, repo="memory", database_url="postgresql+asyncpg://u:p@127.0.0.1:5432/x"
    )
    app = make_app(create_container(settings))
    assert {"walletcore.expire_approvals", "walletcore.prune_policy_usage"} <= set(app.tasks)
    crons = {k[1]: v.cron for k, v in app.periodic_registry.periodic_tasks.items()}
    assert crons["expire_approvals"] == "* * * * *"
