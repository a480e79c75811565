"""The webhook delivery as a job of the deployment: listed by `Jobs.periodic()` with its
period (`WALLETCORE_JOBS_WEBHOOK_SECONDS`, 2 s), registered by procrastinate's app on its
own, and the profile's URL rules and settings wired by the container."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from walletcore.container import create_container
from walletcore.settings import Profile, Settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


def test_the_jobs_list_the_delivery_and_its_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    periods = {
        j.name: j.every_seconds
        for j in create_container(Settings(home=tmp_path, repo="memory")).jobs().periodic()
    }
    assert periods["deliver_webhooks"] == 2.0
    assert periods["prune_webhook_deliveries"] == periods["prune_events"]
    monkeypatch.setenv("WALLETCORE_JOBS_WEBHOOK_SECONDS", "0.5")
    jobs = create_container(Settings(home=tmp_path, repo="memory")).jobs().periodic()
    assert {j.name: j.every_seconds for j in jobs}["deliver_webhooks"] == 0.5


def test_procrastinate_runs_the_delivery_every_period(tmp_path: Path) -> None:
    from walletcore_jobs.app import make_app

    settings = Settings(
        home=tmp_path, repo="memory", database_url="postgresql+asyncpg://u:p@127.0.0.1:5432/x"
    )
    app = make_app(create_container(settings))
    assert {"walletcore.deliver_webhooks", "walletcore.prune_webhook_deliveries"} <= set(app.tasks)
    crons = {k[1]: v.cron for k, v in app.periodic_registry.periodic_tasks.items()}
    assert crons["deliver_webhooks"] == "* * * * * */2"


def test_the_profile_sets_the_url_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = create_container(Settings(home=tmp_path, repo="memory")).webhooks()
    assert (sandbox.https_only, sandbox.allow_private) == (False, True)
    production = Settings(home=tmp_path, repo="memory", profile=Profile.PRODUCTION)
    strict = create_container(production).webhooks()
    assert (strict.https_only, strict.allow_private) == (True, False)
    monkeypatch.setenv("WALLETCORE_WEBHOOK_ALLOW_PRIVATE", "true")
    monkeypatch.setenv("WALLETCORE_WEBHOOK_RETRY_SCHEDULE", "0,1,30")
    monkeypatch.setenv("WALLETCORE_WEBHOOK_ROTATION_OVERLAP_HOURS", "2")
    tuned = create_container(production).webhooks()
    assert tuned.allow_private and tuned.https_only
    assert [d.total_seconds() for d in tuned.schedule.delays] == [0, 1, 30]
    assert tuned.rotation_overlap == timedelta(hours=2)


def test_a_bad_schedule_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("WALLETCORE_WEBHOOK_RETRY_SCHEDULE", "0,-5")
    with pytest.raises(ValidationError):
        create_container(Settings(home=tmp_path, repo="memory")).webhooks()
