"""How the core plans the chains from plugins (`walletcore.chainplugins`): one plugin and
mode per chain from `WALLETCORE_CHAINS` and `WALLETCORE_CHAIN_<CHAIN>`, the sandbox ledger
standing in where a chain has no gateway of the mode, the plugins' own settings read and
checked with the variables named, and the production profile's refusals. Made-up plugins
only: no chain library is involved."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import (
    ChainDefinitions,
    ChainPlugin,
    GatewayContext,
    GatewayFactory,
    KeyDerivation,
    build_gateways,
    env_aliases,
    env_name,
    plan_chains,
)
from walletcore.clock import ManualClock
from walletcore.container import create_container, served_catalog
from walletcore.domain.assets import CONTRACT_CHAINS, Asset, AssetKind, Chain
from walletcore.domain.chains import HEX, ChainDescription, WrongPassword
from walletcore.ports import NonceLeases
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore.testing import CONTRACT_CATALOG


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)


class Gateway:
    """Stands for a gateway: the plan only builds, it never calls one."""

    def __init__(self, context: GatewayContext[Any], kind: str) -> None:
        self.chain = context.chain
        self.kind = kind
        self.context = context


class NodeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", populate_by_name=True)

    ethereum_node_url: SecretStr | None = Field(
        default=None, validation_alias=env_aliases("ETHEREUM_NODE_URL", "NODE_ETHEREUM")
    )
    node_timeout_seconds: float = Field(default=5.0, gt=0)


def _needs(chain: Chain, settings: NodeSettings) -> Iterator[str]:
    if settings.ethereum_node_url is None:
        yield f"{env_name(NodeSettings, 'ethereum_node_url')} is required"


def _validate(chain: Chain, address: str) -> str:
    return address.strip()


def _verify(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    return signature == b"ok"


def _keys(chains: frozenset[Chain]) -> dict[Chain, KeyDerivation]:
    return {c: KeyDerivation("m/0'", "secp256k1", lambda public: public.hex()) for c in chains}


def _describes(chains: frozenset[Chain]) -> dict[Chain, ChainDescription]:
    return {
        c: ChainDescription(
            chain=c,
            assets=CONTRACT_CATALOG.assets_of(c),
            replaces_by="fee-bump",
            default_fee_cap=Decimal(1),
            wrong_password=WrongPassword.INVALID_CREDENTIALS,
            hashes=HEX,
        )
        for c in chains
    }


def _node(context: GatewayContext[NodeSettings]) -> Gateway:
    return Gateway(context, "node")


def _ledger(context: GatewayContext[None]) -> Gateway:
    context.shared("ledger", list).append(context.chain)
    return Gateway(context, "ledger")


EVERY = frozenset(CONTRACT_CHAINS)
DEFINES = ChainPlugin[None](
    name="defines",
    chains=EVERY,
    validate_address=_validate,
    verify_signature=_verify,
    keys=_keys(EVERY),
    describes=_describes(EVERY),
)
NODES = ChainPlugin(
    name="nodes",
    chains=frozenset({Chain.ETHEREUM, Chain.SOLANA}),
    settings_model=NodeSettings,
    gateways={
        "rpc": GatewayFactory(_node, needs=_needs),
        "devnet": GatewayFactory(_node, sandbox_only=True),
    },
)
SANDBOX = ChainPlugin[None](
    name="sandbox",
    chains=EVERY,
    gateways={"sandbox": GatewayFactory(_ledger, sandbox_only=True)},
)
REGISTRY: dict[str, ChainPlugin[Any]] = {p.name: p for p in (DEFINES, NODES, SANDBOX)}
URL = {"nodes": NodeSettings(ethereum_node_url="http://node")}


def settings(tmp_path: Path, **values: Any) -> Settings:
    return Settings(home=tmp_path, **values)


def labels(plan: Any) -> dict[Chain, str]:
    return {c: choice.label for c, choice in plan.choices.items()}


def test_the_shorthand_picks_a_mode_and_the_ledger_stands_in(tmp_path: Path) -> None:
    plan = plan_chains(settings(tmp_path, chains="rpc"), REGISTRY, URL)
    assert labels(plan)[Chain.ETHEREUM] == labels(plan)[Chain.SOLANA] == "nodes:rpc"
    assert labels(plan)[Chain.BITCOIN] == "sandbox:sandbox" and plan.choices[Chain.TRON].stand_in
    assert plan.settings == {"nodes": URL["nodes"], "sandbox": None}
    assert labels(plan_chains(settings(tmp_path), REGISTRY)) == dict.fromkeys(
        CONTRACT_CHAINS, "sandbox:sandbox"
    )


def test_one_chain_picks_its_own_plugin_and_mode(tmp_path: Path) -> None:
    chosen = {"SOLANA": "nodes:devnet", "ETHEREUM": "sandbox", "BSC": "sandbox:sandbox"}
    plan = plan_chains(settings(tmp_path, chains="rpc", gateways=chosen), REGISTRY)
    assert labels(plan)[Chain.SOLANA] == "nodes:devnet"
    assert labels(plan)[Chain.ETHEREUM] == "sandbox:sandbox"
    assert not plan.choices[Chain.ETHEREUM].stand_in  # chosen, not standing in
    assert plan.choices[Chain.SOLANA].source == "WALLETCORE_CHAIN_SOLANA=nodes:devnet"
    # a bare mode, and a plugin whose mode follows WALLETCORE_CHAINS
    bare = plan_chains(settings(tmp_path, gateways={"SOLANA": "devnet"}), REGISTRY)
    assert labels(bare)[Chain.SOLANA] == "nodes:devnet"
    follows = plan_chains(
        settings(tmp_path, chains="devnet", gateways={"SOLANA": "nodes"}), REGISTRY
    )
    assert labels(follows)[Chain.SOLANA] == "nodes:devnet"


@pytest.mark.parametrize(
    ("gateways", "message"),
    [
        ({"SOLANA": "nope"}, "WALLETCORE_CHAIN_SOLANA=nope: no chain plugin 'nope'"),
        ({"BITCOIN": "nodes"}, "nodes serves ETHEREUM, SOLANA, not BITCOIN"),
        ({"SOLANA": "nodes"}, "name one of the plugin's gateways: nodes:devnet, nodes:rpc"),
        ({"SOLANA": "nodes:mainnet"}, "name one of the plugin's gateways"),
    ],
)
def test_a_choice_that_cannot_be_served_is_refused_naming_its_variable(
    tmp_path: Path, gateways: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        plan_chains(settings(tmp_path, gateways=gateways), REGISTRY)


def test_an_unknown_mode_and_two_plugins_of_one_mode_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="WALLETCORE_CHAINS=fast: no installed chain"):
        plan_chains(settings(tmp_path, chains="fast"), REGISTRY)
    other = ChainPlugin[NodeSettings](
        name="other", chains=frozenset({Chain.SOLANA}), gateways={"rpc": GatewayFactory(_node)}
    )
    both = {**REGISTRY, "other": other}
    with pytest.raises(ConfigurationError, match="WALLETCORE_CHAIN_SOLANA=<plugin>"):
        plan_chains(settings(tmp_path, chains="rpc"), both, URL)
    plan = plan_chains(settings(tmp_path, chains="rpc", gateways={"SOLANA": "other"}), both, URL)
    assert labels(plan)[Chain.SOLANA] == "other:rpc"


def test_missing_settings_are_named_together_and_never_echo_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        plan_chains(settings(tmp_path, chains="rpc"), REGISTRY)
    assert str(caught.value) == (
        "WALLETCORE_ETHEREUM_NODE_URL (or WALLETCORE_NODE_ETHEREUM) is required"
    )  # once, though two chains need it
    monkeypatch.setenv("WALLETCORE_NODE_ETHEREUM", "http://older-name")
    monkeypatch.setenv("WALLETCORE_NODE_TIMEOUT_SECONDS", "-3")
    with pytest.raises(ConfigurationError) as caught:
        plan_chains(settings(tmp_path, chains="rpc"), REGISTRY)
    assert str(caught.value) == (
        "WALLETCORE_NODE_TIMEOUT_SECONDS: Input should be greater than 0 (chain plugin nodes)"
    )
    monkeypatch.setenv("WALLETCORE_NODE_TIMEOUT_SECONDS", "2")
    plan = plan_chains(settings(tmp_path, chains="rpc"), REGISTRY)
    read = plan.settings["nodes"]
    assert isinstance(read, NodeSettings) and read.ethereum_node_url is not None
    assert read.ethereum_node_url.get_secret_value() == "http://older-name"
    # a plugin not chosen is not read at all
    monkeypatch.setenv("WALLETCORE_NODE_TIMEOUT_SECONDS", "-3")
    assert plan_chains(settings(tmp_path), REGISTRY).settings == {"sandbox": None}


def test_production_refuses_sandbox_only_gateways_and_stand_ins(tmp_path: Path) -> None:
    production = {"profile": Profile.PRODUCTION}
    with pytest.raises(ConfigurationError) as caught:
        plan_chains(settings(tmp_path, chains="devnet", **production), REGISTRY, URL)
    assert caught.value.problems == (
        (
            "WALLETCORE_CHAINS=devnet has no production gateway for BITCOIN, BSC, TRON, "
            "POLYGON yet; the production profile refuses to start on it"
        ),
        (
            "WALLETCORE_CHAINS=devnet is a sandbox adapter (nodes:devnet: ETHEREUM, SOLANA); "
            "the production profile refuses to start on it (set WALLETCORE_CHAINS=rpc and "
            "each chain's node: docs/deploy.md)"
        ),
    )
    others = frozenset({Chain.BITCOIN, Chain.BSC, Chain.TRON, Chain.POLYGON})
    real = ChainPlugin[NodeSettings](
        name="real", chains=others, gateways={"live": GatewayFactory(_node)}
    )
    plan = plan_chains(
        settings(tmp_path, chains="rpc", gateways=dict.fromkeys(others, "real"), **production),
        {**REGISTRY, "real": real},
        URL,
    )
    assert not any(c.stand_in or c.factory.sandbox_only for c in plan.choices.values())


def test_gateways_get_the_chains_definition_and_share_a_scope_per_plugin(
    tmp_path: Path,
) -> None:
    plan = plan_chains(settings(tmp_path, chains="rpc"), REGISTRY, URL)

    def leases() -> NonceLeases:
        raise AssertionError("not asked for")

    gateways = build_gateways(
        plan,
        settings=settings(tmp_path),
        clock=ManualClock(),
        catalog=CONTRACT_CATALOG,
        nonce_leases=leases,
    )
    assert list(gateways) == list(CONTRACT_CHAINS)
    eth = gateways[Chain.ETHEREUM]
    assert isinstance(eth, Gateway) and eth.kind == "node"
    assert eth.context.settings is URL["nodes"]
    assert eth.context.validate_address(Chain.ETHEREUM, " 0xabc ") == "0xabc"
    assert eth.context.verify_signature(Chain.ETHEREUM, "a", b"", b"ok")
    assert eth.context.keys.path == "m/0'"
    assert eth.context.description is DEFINES.describes[Chain.ETHEREUM]
    assert plan.descriptions == {c: DEFINES.describes[c] for c in plan.choices}
    ledger = gateways[Chain.BITCOIN]
    assert isinstance(ledger, Gateway)
    assert ledger.context.shared("ledger", list) == [
        Chain.BITCOIN,
        Chain.BSC,
        Chain.TRON,
        Chain.POLYGON,
    ]


def test_a_gateway_must_replace_transfers_as_its_chain_is_described(tmp_path: Path) -> None:
    def resigning(context: GatewayContext[None]) -> Gateway:
        gateway = Gateway(context, "resigning")
        gateway.resigns = True  # type: ignore[attr-defined]
        return gateway

    plugin = ChainPlugin[None](
        name="resigning",
        chains=frozenset({Chain.BITCOIN}),
        gateways={"rpc": GatewayFactory(resigning)},
    )
    registry = {**REGISTRY, "resigning": plugin}
    plan = plan_chains(settings(tmp_path, gateways={"BITCOIN": "resigning"}), registry, URL)

    def leases() -> NonceLeases:
        raise AssertionError("not asked for")

    with pytest.raises(ConfigurationError, match="re-signs stuck transfers; BITCOIN's description"):
        build_gateways(
            plan,
            settings=settings(tmp_path),
            clock=ManualClock(),
            catalog=CONTRACT_CATALOG,
            nonce_leases=leases,
        )


def test_each_chain_is_defined_by_exactly_one_plugin(tmp_path: Path) -> None:
    twice = ChainPlugin[None](
        name="twice",
        chains=frozenset({Chain.TRON}),
        validate_address=_validate,
        verify_signature=_verify,
        keys=_keys(frozenset({Chain.TRON})),
        describes=_describes(frozenset({Chain.TRON})),
    )
    with pytest.raises(ConfigurationError, match=r"defines TRON \(defines, twice\)"):
        ChainDefinitions.of({**REGISTRY, "twice": twice})
    with pytest.raises(ConfigurationError, match="no installed chain plugin defines BITCOIN"):
        plan_chains(settings(tmp_path), {"sandbox": SANDBOX})


def test_a_plugin_defines_its_chains_whole_or_not_at_all() -> None:
    with pytest.raises(TypeError, match="together"):
        ChainPlugin[None](name="half", chains=EVERY, validate_address=_validate)
    with pytest.raises(TypeError, match="keys for each of its chains"):
        ChainPlugin[None](
            name="short",
            chains=EVERY,
            validate_address=_validate,
            verify_signature=_verify,
            keys=_keys(frozenset({Chain.TRON})),
            describes=_describes(EVERY),
        )
    with pytest.raises(TypeError, match="a description of each of its chains"):
        ChainPlugin[None](
            name="undescribed",
            chains=EVERY,
            validate_address=_validate,
            verify_signature=_verify,
            keys=_keys(EVERY),
            describes=_describes(frozenset({Chain.TRON})),
        )
    with pytest.raises(TypeError, match="another chain's description"):
        ChainPlugin[None](
            name="misdescribed",
            chains=frozenset({Chain.TRON}),
            validate_address=_validate,
            verify_signature=_verify,
            keys=_keys(frozenset({Chain.TRON})),
            describes={Chain.TRON: _describes(frozenset({Chain.BSC}))[Chain.BSC]},
        )
    with pytest.raises(TypeError, match="plain word"):
        ChainPlugin[None](name="a:b", chains=EVERY)


# -- a chain a plugin adds -----------------------------------------------------------------
EXTRA = Chain("EXTRA2")
EXTRA_COIN = Asset(9001, EXTRA, "XC", AssetKind.NATIVE, None, 18)
EXTRA_TOKEN = Asset(90011, EXTRA, "XT", AssetKind.TOKEN, "ERC20", 6)
ADDS = ChainPlugin[None](
    name="adds",
    chains=frozenset({EXTRA}),
    validate_address=_validate,
    verify_signature=_verify,
    keys=_keys(frozenset({EXTRA})),
    describes={
        EXTRA: ChainDescription(
            chain=EXTRA,
            assets=(EXTRA_COIN, EXTRA_TOKEN),
            replaces_by="fee-bump",
            default_fee_cap=Decimal(1),
            wrong_password=WrongPassword.INVALID_CREDENTIALS,
            hashes=HEX,
        )
    },
    gateways={"rpc": GatewayFactory(lambda context: Gateway(context, "adds"))},
)
WITH_ADDS: dict[str, ChainPlugin[Any]] = {**REGISTRY, "adds": ADDS}


def _no_leases() -> NonceLeases:
    raise AssertionError("not asked for")


def test_a_chain_a_plugin_adds_is_served_only_when_the_deployment_names_it(
    tmp_path: Path,
) -> None:
    unnamed = settings(tmp_path, chains="rpc")
    plan = plan_chains(unnamed, WITH_ADDS, URL)
    assert list(plan.choices) == list(CONTRACT_CHAINS) == list(plan.descriptions)
    assert served_catalog(unnamed, WITH_ADDS) == CONTRACT_CATALOG
    assert "adds" not in plan.settings  # its settings are not even read

    named = settings(tmp_path, chains="rpc", gateways={"EXTRA2": "adds:rpc"})
    plan = plan_chains(named, WITH_ADDS, URL)
    assert list(plan.choices) == [*CONTRACT_CHAINS, EXTRA]  # after the contract's six
    assert labels(plan)[EXTRA] == "adds:rpc"
    assert plan.descriptions[EXTRA] is ADDS.describes[EXTRA]
    catalog = served_catalog(named, WITH_ADDS)
    assert catalog.assets == (*CONTRACT_CATALOG.assets, EXTRA_COIN, EXTRA_TOKEN)
    assert catalog.chains == tuple(plan.choices)  # the catalog and the plan agree
    gateways = build_gateways(
        plan, settings=named, clock=ManualClock(), nonce_leases=_no_leases, catalog=catalog
    )
    built = gateways[EXTRA]
    assert isinstance(built, Gateway) and built.kind == "adds"
    assert built.context.description is ADDS.describes[EXTRA]


def test_the_sandbox_ledger_stands_in_for_a_plugin_chain_named_with_it(tmp_path: Path) -> None:
    for spec in ("sandbox", "sandbox:sandbox"):
        plan = plan_chains(settings(tmp_path, gateways={"EXTRA2": spec}), WITH_ADDS)
        assert labels(plan)[EXTRA] == "sandbox:sandbox" and not plan.choices[EXTRA].stand_in
        assert plan.descriptions[EXTRA] is ADDS.describes[EXTRA]  # its rules, its plugin's
    production = settings(
        tmp_path, chains="rpc", gateways={"EXTRA2": "sandbox"}, profile=Profile.PRODUCTION
    )
    with pytest.raises(ConfigurationError, match=r"WALLETCORE_CHAIN_EXTRA2=sandbox is a sandbox"):
        plan_chains(production, WITH_ADDS, URL)


def test_a_named_chain_no_installed_plugin_defines_is_refused(tmp_path: Path) -> None:
    named = settings(tmp_path, gateways={"EXTRA2": "adds:rpc"})
    message = r"WALLETCORE_CHAIN_EXTRA2=adds:rpc: no installed chain plugin defines EXTRA2"
    with pytest.raises(ConfigurationError, match=message):
        plan_chains(named, REGISTRY)
    with pytest.raises(ConfigurationError, match=message):
        served_catalog(named, REGISTRY)


BASE = Chain("BASECHAIN")
BASE_ASSETS = (
    Asset(8453, BASE, "ETH", AssetKind.NATIVE, None, 18),
    Asset(84531, BASE, "USDC", AssetKind.TOKEN, "ERC20", 6),
)
BASE_PLUGIN = ChainPlugin[None](
    name="base",
    chains=frozenset({BASE}),
    validate_address=_validate,
    verify_signature=_verify,
    keys=_keys(frozenset({BASE})),
    describes={
        BASE: ChainDescription(
            chain=BASE,
            assets=BASE_ASSETS,
            replaces_by="fee-bump",
            default_fee_cap=Decimal("0.01"),
            wrong_password=WrongPassword.INVALID_CREDENTIALS,
            hashes=HEX,
        )
    },
    gateways={"own": GatewayFactory(_ledger, sandbox_only=True)},
)
WITH_BASE: dict[str, ChainPlugin[Any]] = {**REGISTRY, "base": BASE_PLUGIN}


def test_a_named_plugin_chain_is_planned_and_its_description_assets_served(
    tmp_path: Path,
) -> None:
    named = settings(tmp_path, repo="memory", gateways={"BASECHAIN": "base"})
    plan = plan_chains(named, WITH_BASE)
    assert list(plan.choices) == [*CONTRACT_CHAINS, BASE]
    assert labels(plan)[BASE] == "base:own"
    container = create_container(named, chain_plugins=WITH_BASE)
    catalog = container.catalog()
    assert catalog.chains == (*CONTRACT_CHAINS, BASE)
    assert catalog.assets == (*CONTRACT_CATALOG.assets, *BASE_ASSETS)
    assert catalog.native_asset(BASE) is BASE_ASSETS[0]
    assert list(container.descriptions()) == list(catalog.chains)


def test_an_installed_chain_nobody_names_is_not_served(tmp_path: Path) -> None:
    container = create_container(settings(tmp_path, repo="memory"), chain_plugins=WITH_BASE)
    assert container.catalog() == CONTRACT_CATALOG
    assert BASE not in container.chain_plan().choices
    assert 8453 not in container.catalog()


def test_the_catalog_is_what_the_served_descriptions_declare(tmp_path: Path) -> None:
    """The contract's chains are served with the assets their defining plugin declares,
    not a table of the core's."""
    fewer = {c: replace(d, assets=d.assets[:1]) for c, d in DEFINES.describes.items()}
    registry = {**REGISTRY, "defines": replace(DEFINES, describes=fewer)}
    container = create_container(settings(tmp_path, repo="memory"), chain_plugins=registry)
    catalog = container.catalog()
    assert catalog.asset_ids == (1, 2, 3, 4, 5, 6)  # the natives only, in contract order
