"""The production profile starts on real adapters only and names every missing setting at
once: one problem per setting, each saying what to set."""

from __future__ import annotations

from pathlib import Path

import pytest

from walletcore.container import check_profile, create_container
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings

RPC_ENV = {
    "WALLETCORE_CHAINS": "rpc",
    "WALLETCORE_BITCOIN_ESPLORA_URL": "https://esplora.example/api",
    "WALLETCORE_ETHEREUM_RPC_URL": "https://eth.example",
    "WALLETCORE_BSC_RPC_URL": "https://bsc.example",
    "WALLETCORE_POLYGON_RPC_URL": "https://polygon.example",
    "WALLETCORE_TRON_NODE_URL": "https://tron.example",
    "WALLETCORE_SOLANA_RPC_URL": "https://solana.example",
}
REAL_ENV = {
    **RPC_ENV,
    "WALLETCORE_PRICES": "coingecko",
    "WALLETCORE_VENUE": "exchange",
    "WALLETCORE_EXCHANGE_API_KEY": "exchange-key",
    "WALLETCORE_EXCHANGE_SECRET": "exchange-secret",
    "WALLETCORE_DATABASE_URL": "postgresql+asyncpg://walletcore@db.example/walletcore",
    "WALLETCORE_TOKEN_SIGNING_KEY": "11" * 32,
    "WALLETCORE_MASTER_KEY": "22" * 32,
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("WALLETCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WALLETCORE_PROFILE", "production")


def problems() -> tuple[str, ...]:
    with pytest.raises(ConfigurationError) as refused:
        check_profile(create_container(Settings()))
    return refused.value.problems


def test_nothing_configured_names_every_setting_at_once() -> None:
    found = problems()
    expected = [
        "WALLETCORE_CHAINS=sandbox is a sandbox adapter",
        "WALLETCORE_PRICES=sandbox is a sandbox adapter",
        "WALLETCORE_VENUE=sandbox is a sandbox adapter",
        "WALLETCORE_DATABASE_URL must name the deployment's PostgreSQL database",
        "WALLETCORE_TOKEN_SIGNING_KEY is required on the production profile",
        "WALLETCORE_MASTER_KEY is required on the production profile",
    ]
    for start in expected:
        assert sum(p.startswith(start) for p in found) == 1, (start, found)
    assert len(found) == len(expected)


def test_each_missing_chain_and_exchange_setting_is_its_own_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in REAL_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("WALLETCORE_ETHEREUM_RPC_URL", "WALLETCORE_SOLANA_RPC_URL"):
        monkeypatch.delenv(name)
    monkeypatch.delenv("WALLETCORE_EXCHANGE_SECRET")
    found = problems()
    assert any(p.startswith("WALLETCORE_ETHEREUM_RPC_URL") for p in found), found
    assert any(p.startswith("WALLETCORE_SOLANA_RPC_URL") for p in found), found
    assert any("WALLETCORE_EXCHANGE_SECRET" in p for p in found), found
    assert len(found) == 3, found
    assert "exchange-key" not in " ".join(found)  # a secret is never shown


def test_sqlite_is_refused_in_production(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in REAL_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WALLETCORE_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'wc.db'}")
    [problem] = problems()
    assert problem.startswith("WALLETCORE_DATABASE_URL must name the deployment's PostgreSQL")


def test_real_adapters_everywhere_start(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in REAL_ENV.items():
        monkeypatch.setenv(name, value)
    check_profile(create_container(Settings()))  # no network is needed to check


def test_the_cli_prints_one_line_per_problem(capsys: pytest.CaptureFixture[str]) -> None:
    from walletcore_cli.main import main

    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "walletcore: 6 configuration errors:"
    assert [line.split("=")[0] for line in err[1:3]] == [
        "  - WALLETCORE_CHAINS",
        "  - WALLETCORE_PRICES",
    ]
    assert len([line for line in err if line.startswith("  - ")]) == 6
