"""A server worker's garbage collector (`walletcore_litestar.server.tune_collector`,
`WALLETCORE_GC_YOUNG_THRESHOLD`; docs/operations.md, docs/performance.md, "The workers'
collector")."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from litestar import Litestar, get
from pydantic import ValidationError

from walletcore_litestar import server
from walletcore_litestar.operations import YOUNG_THRESHOLD, OperationsSettings


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    """This test process's collector as it was, whatever a test set."""
    saved = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*saved)


def test_the_youngest_generation_is_collected_after_the_threshold() -> None:
    _, middle, old = gc.get_threshold()
    gc.unfreeze()
    kept = object()  # tracked: a container made before the tuning
    holder = [kept]
    server.tune_collector(12_345)
    assert gc.get_threshold() == (12_345, middle, old)
    # what was built before is frozen out of the collector's passes
    assert gc.get_freeze_count() > 0
    assert not any(obj is holder for obj in gc.get_objects())


def test_zero_leaves_pythons_own_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    server.tune_collector(0)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() > 0


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WALLETCORE_GC_YOUNG_THRESHOLD", raising=False)
    assert OperationsSettings().gc_young_threshold == YOUNG_THRESHOLD == 10_000
    monkeypatch.setenv("WALLETCORE_GC_YOUNG_THRESHOLD", "5000")
    assert OperationsSettings().gc_young_threshold == 5000
    monkeypatch.setenv("WALLETCORE_GC_YOUNG_THRESHOLD", "0")
    assert OperationsSettings().gc_young_threshold == 0


@pytest.mark.parametrize("value", ["-1", "1000001", "many"])
def test_a_threshold_out_of_range_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A negative value would be Python's "never"; the collector is never switched off."""
    monkeypatch.setenv("WALLETCORE_GC_YOUNG_THRESHOLD", value)
    with pytest.raises(ValidationError) as caught:
        OperationsSettings()
    assert "gc_young_threshold" in str(caught.value)


def test_a_worker_tunes_its_collector_once_the_app_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`app_factory` (what each server worker imports) applies the setting after the app
    and its warm-up, so what they built is what is frozen."""
    order: list[str] = []

    @get("/")
    async def index() -> str:
        return "ok"

    class Services:
        def warm_up(self) -> None:
            order.append("warm_up")

    def create_app() -> Litestar:
        order.append("create_app")
        return Litestar([index])

    def tune(threshold: int) -> None:
        order.append(f"tune {threshold}")
        real_tune(threshold)

    real_tune = server.tune_collector
    monkeypatch.delenv(server.GRANIAN_WORKER_ENV, raising=False)
    monkeypatch.setattr(server, "configure_logging", lambda *_: None)
    monkeypatch.setattr(server, "dump_stacks_on_sigusr1", lambda: None)
    monkeypatch.setattr(server, "create_app", create_app)
    monkeypatch.setattr(server, "services_of", lambda _app: Services())
    monkeypatch.setattr(server, "tune_collector", tune)
    monkeypatch.setenv("WALLETCORE_GC_YOUNG_THRESHOLD", "4321")
    app: Any = server.app_factory()
    assert isinstance(app, Litestar)
    assert order == ["create_app", "warm_up", "tune 4321"]
    assert gc.get_threshold()[0] == 4321
