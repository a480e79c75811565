"""Adapter discovery (`walletcore.plugins`): the core falls back on its own fakes only, and
a missing adapter is an `AdapterNotFound` that names the extra to install."""

from __future__ import annotations

import re
import sys
from importlib.metadata import EntryPoint, EntryPoints
from pathlib import Path

import pytest

from walletcore import plugins
from walletcore.container import check_profile, create_container
from walletcore.plugins import AdapterNotFound
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings


def test_the_fallbacks_are_the_cores_own_fakes() -> None:
    for target in plugins._BUILTIN.values():
        assert target.startswith("walletcore.testing."), target


def _without(group: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed entry points, less one (an install without that adapter's extra)."""
    real = plugins.entry_points

    def entry_points(*, group: str) -> EntryPoints:
        return EntryPoints(ep for ep in real(group=group) if (ep.group, ep.name) != gone)

    gone = (group, name)
    monkeypatch.setattr(plugins, "entry_points", entry_points)


@pytest.mark.parametrize(
    ("field", "group"),
    [("prices", "walletcore.price_sources"), ("venue", "walletcore.venues")],
)
def test_a_sandbox_adapter_that_is_not_installed_names_the_sandbox_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, field: str, group: str
) -> None:
    _without(group, "sandbox", monkeypatch)
    container = create_container(Settings(home=tmp_path, repo="memory"))
    provider = {"prices": "price_feed"}.get(field, field)  # the upstream source, as built
    with pytest.raises(AdapterNotFound) as caught:
        getattr(container, provider)()
    message = str(caught.value)
    assert f"no adapter 'sandbox' in {group}" in message
    assert "pip install 'walletcore[sandbox]'" in message


def test_without_the_sandbox_chain_plugin_the_chains_name_the_sandbox_extra(
    tmp_path: Path,
) -> None:
    installed = {n: p for n, p in plugins.chain_plugins().items() if n != "sandbox"}
    container = create_container(Settings(home=tmp_path, repo="memory"), chain_plugins=installed)
    with pytest.raises(ConfigurationError, match=re.escape("pip install 'walletcore[sandbox]'")):
        check_profile(container)


def test_an_adapter_whose_libraries_are_missing_names_its_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The entry point is there (one distribution), the extra's library is not."""
    missing = EntryPoint(name="sql", value="walletcore_missing_library:build", group="x")
    real = plugins.entry_points

    def entry_points(*, group: str) -> EntryPoints:
        if group != "walletcore.repos":
            return real(group=group)
        kept = [ep for ep in real(group=group) if ep.name != "sql"]
        return EntryPoints([*kept, missing])

    monkeypatch.setattr(plugins, "entry_points", entry_points)
    assert "walletcore_missing_library" not in sys.modules
    with pytest.raises(AdapterNotFound) as caught:
        plugins.load("walletcore.repos", "sql")
    message = str(caught.value)
    assert "No module named 'walletcore_missing_library'" in message
    assert "pip install 'walletcore[sql]'" in message


def test_an_unknown_adapter_lists_what_is_installed() -> None:
    with pytest.raises(
        AdapterNotFound,
        match="no adapter 'nope' in walletcore.venues; installed: exchange, sandbox",
    ):
        plugins.load("walletcore.venues", "nope")
