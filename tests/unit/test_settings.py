"""Settings from WALLETCORE_* variables, and the operator secrets they lead to."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from walletcore.container import check_profile, create_container
from walletcore.domain.assets import Chain
from walletcore.secretfiles import ConfigurationError, operator_secret
from walletcore.settings import DEFAULT_UNAVAILABLE, Profile, Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


def test_defaults_are_the_sandbox_profile(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    assert settings.profile is Profile.SANDBOX
    assert (settings.repo, settings.prices, settings.venue) == ("sql", "sandbox", "sandbox")
    assert (settings.quote_ttl_seconds, settings.trades_page_size) == (60, 10)
    assert settings.limited_assets == []
    # the spec's "unavailable on some endpoints" assets, 42, 51 and 61
    assert {tuple(v) for v in settings.unavailable_assets.values()} == {(42, 51, 61)}
    assert settings.unavailable_assets == DEFAULT_UNAVAILABLE
    assert settings.is_unavailable("platform/balance", 51)
    assert not settings.is_unavailable("sell", 51)


def test_values_come_from_prefixed_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALLETCORE_PROFILE", "production")
    monkeypatch.setenv("WALLETCORE_QUOTE_TTL_SECONDS", "90")
    monkeypatch.setenv("WALLETCORE_TRADES_PAGE_SIZE", "25")
    monkeypatch.setenv("WALLETCORE_REPO", "memory")
    monkeypatch.setenv("QUOTE_TTL_SECONDS", "5")  # unprefixed: ignored
    settings = Settings()
    assert settings.profile is Profile.PRODUCTION
    assert (settings.quote_ttl_seconds, settings.trades_page_size) == (90, 25)
    assert settings.repo == "memory"


@pytest.mark.parametrize("profile", list(Profile))
def test_one_default_storage_on_every_profile(
    monkeypatch: pytest.MonkeyPatch, profile: Profile
) -> None:
    """`sql` unless asked otherwise, whoever reads the settings (`walletcore serve`, the CLI,
    `create_container()`): nothing sets WALLETCORE_REPO behind the user's back."""
    monkeypatch.setenv("WALLETCORE_PROFILE", profile.value)
    assert Settings().repo == "sql"
    assert Settings(repo="memory").repo == "memory"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1,2,21", [1, 2, 21]), (" 42 , 61 ", [42, 61]), ("[51, 62]", [51, 62]), ("", [])],
)
def test_limited_assets_accept_a_comma_list_or_json(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[int]
) -> None:
    monkeypatch.setenv("WALLETCORE_LIMITED_ASSETS", raw)
    assert Settings().limited_assets == expected


@pytest.mark.parametrize("raw", ["BTC", "1;2", '[1, "x"]'])
def test_limited_assets_refuse_what_is_not_a_list_of_ids(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("WALLETCORE_LIMITED_ASSETS", raw)
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("WALLETCORE_LIMITED_ASSETS", "7", "WALLETCORE_LIMITED_ASSETS: unknown asset ids: [7]"),
        ("WALLETCORE_LIMITED_ASSETS", "1,99", "unknown asset ids: [99]"),
        ("WALLETCORE_UNAVAILABLE_ASSETS", '{"sell": [42, 77]}', "unknown asset ids: [77]"),
    ],
)
def test_asset_ids_the_catalog_does_not_serve_are_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, raw: str, message: str
) -> None:
    """The settings read ids; the container, which has the catalog, checks them."""
    monkeypatch.setenv(name, raw)
    settings = Settings(home=tmp_path, repo="memory")
    with pytest.raises(ConfigurationError) as raised:
        check_profile(create_container(settings))
    assert message in str(raised.value)


def test_unavailable_assets_from_json_with_or_without_slashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WALLETCORE_UNAVAILABLE_ASSETS", '{"/sell": [42], "platform/fee/": [61]}')
    assert Settings().unavailable_assets == {"sell": [42], "platform/fee": [61]}


def test_unavailable_assets_refuse_an_unknown_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALLETCORE_UNAVAILABLE_ASSETS", '{"withdraw": [42]}')
    with pytest.raises(ValidationError, match="unknown endpoints"):
        Settings()


def test_one_chains_gateway_comes_from_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """`WALLETCORE_CHAIN_<CHAIN>=<plugin>[:<mode>]` picks one chain's gateway over
    `WALLETCORE_CHAINS`; the chain plugins' own settings are not the core's."""
    assert Settings().gateways == {}
    monkeypatch.setenv("WALLETCORE_CHAINS", "devnet")
    monkeypatch.setenv("WALLETCORE_CHAIN_SOLANA", " myplugin:rpc ")
    monkeypatch.setenv("walletcore_chain_ethereum", "sandbox")
    settings = Settings()
    assert settings.chains == "devnet"
    assert settings.gateways == {Chain.SOLANA: "myplugin:rpc", Chain.ETHEREUM: "sandbox"}
    assert Settings(gateways={"bsc": "evm"}).gateways == {
        Chain.BSC: "evm",
        Chain.SOLANA: "myplugin:rpc",
        Chain.ETHEREUM: "sandbox",
    }
    assert not hasattr(settings, "rpc_ethereum") and not hasattr(settings, "evm_tokens")


@pytest.mark.parametrize("name", ["ETHER-UM", "X", "1INCH", "A" * 25])
def test_a_chain_variable_naming_no_chain_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(f"WALLETCORE_CHAIN_{name}", "evm")
    with pytest.raises(ValidationError, match=f"WALLETCORE_CHAIN_{name} names no chain"):
        Settings()


def test_a_chain_no_installed_plugin_defines_is_refused_when_planned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A well-formed name is a chain to the settings; the plan asks the plugins."""
    monkeypatch.setenv("WALLETCORE_CHAIN_ETHERUM", "evm")
    settings = Settings(home=tmp_path, repo="memory")
    assert settings.gateways == {Chain("ETHERUM"): "evm"}
    with pytest.raises(ConfigurationError) as raised:
        check_profile(create_container(settings))
    assert "WALLETCORE_CHAIN_ETHERUM=evm: no installed chain plugin defines ETHERUM" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WALLETCORE_QUOTE_TTL_SECONDS", "0"),
        ("WALLETCORE_QUOTE_TTL_SECONDS", "3601"),
        ("WALLETCORE_TRADES_PAGE_SIZE", "0"),
        ("WALLETCORE_TRADES_PAGE_SIZE", "101"),
        ("WALLETCORE_PRICE_REFRESH_SECONDS", "0"),
        ("WALLETCORE_PROFILE", "staging"),
    ],
)
def test_out_of_range_values_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_secrets_never_show_in_a_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "ab" * 32
    monkeypatch.setenv("WALLETCORE_TOKEN_SIGNING_KEY", key)
    monkeypatch.setenv("WALLETCORE_DATABASE_URL", "postgresql://u:hunter2@db/walletcore")
    settings = Settings()
    assert key not in repr(settings) and "hunter2" not in repr(settings)
    assert key not in str(settings.model_dump())


# -- operator secrets --------------------------------------------------------------------
def test_the_sandbox_generates_a_secret_once_and_keeps_it(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    first = operator_secret(settings, "token_signing_key", "token-signing.key")
    assert len(first) == 32
    assert operator_secret(settings, "token_signing_key", "token-signing.key") == first
    path = tmp_path / "home" / "token-signing.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (
        operator_secret(Settings(home=tmp_path / "other"), "token_signing_key", "token-signing.key")
        != first
    )


def test_a_configured_secret_wins(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, token_signing_key="11" * 32)  # type: ignore[arg-type]
    assert operator_secret(settings, "token_signing_key", "token-signing.key") == bytes.fromhex(
        "11" * 32
    )
    assert not (tmp_path / "token-signing.key").exists()


@pytest.mark.parametrize("value", ["11" * 31, "zz" * 32, "11" * 33])
def test_a_malformed_secret_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    settings = Settings(home=tmp_path, master_key=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError) as raised:
        operator_secret(settings, "master_key", "master.key")
    assert value not in str(raised.value)  # the message names the variable, not the value
    assert "WALLETCORE_MASTER_KEY" in str(raised.value)


def test_production_never_generates_a_secret(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, profile=Profile.PRODUCTION)
    with pytest.raises(ConfigurationError, match="WALLETCORE_TOKEN_SIGNING_KEY"):
        operator_secret(settings, "token_signing_key", "token-signing.key")
    assert not list(tmp_path.iterdir())


def test_the_nonce_wait_reads_from_the_environment_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert Settings(home=tmp_path).nonce_wait_seconds == 180.0
    monkeypatch.setenv("WALLETCORE_NONCE_WAIT_SECONDS", "30")
    assert Settings(home=tmp_path).nonce_wait_seconds == 30.0
    for bad in (-1, 7200):
        with pytest.raises(ValidationError):
            Settings(home=tmp_path, nonce_wait_seconds=bad)
