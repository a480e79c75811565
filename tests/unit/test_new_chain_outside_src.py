"""A new chain touches no file in src/: BASECHAIN (`tests/plugins/walletcore_l2chain`,
served over HTTP in tests/integration/http/test_http_new_chain.py) lives in its own
package, written against walletcore's public API only.

- nothing in src/ names it: its chain, its asset ids, its package or its entry point;
- the package imports public modules only (`walletcore.chainplugins`,
  `walletcore.domain.*`, the EVM family's `walletcore_chains.evm`), and no private name;
- loaded from its own directory (not installed), it builds a plugin that defines and
  describes its chain, on top of the contract's six, which it leaves as they are.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from walletcore.chainplugins import ChainPlugin
from walletcore.domain.assets import CONTRACT_ASSETS, CONTRACT_CHAINS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = ROOT / "tests" / "plugins" / "walletcore_l2chain"
MODULE = PACKAGE / "src" / "walletcore_l2chain" / "__init__.py"
#: what only the package defines: its chain, its assets' ids, its names
OWN_NAMES = re.compile(r"BASECHAIN|walletcore_l2chain|l2chain|\b8453\b|\b84531\b", re.IGNORECASE)
#: the public modules a chain package may import (stdlib aside)
PUBLIC = (
    "walletcore.chainplugins",
    "walletcore.domain.assets",
    "walletcore.domain.chains",
    "walletcore_chains.evm",
)


def test_nothing_in_src_names_the_new_chain() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*"))
        if path.is_file() and path.suffix in {".py", ".toml", ".ini", ".mako", ".vy", ".feature"}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if OWN_NAMES.search(line)
    ]
    assert found == []


def test_the_package_imports_the_public_api_only() -> None:
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    imported: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None
            imported.append((node.module, [alias.name for alias in node.names]))
    ours = [(m, names) for m, names in imported if m.split(".")[0].startswith("walletcore")]
    assert {m for m, _ in ours} == set(PUBLIC)
    private = [f"{m}.{n}" for m, names in ours for n in names if n.startswith("_")]
    assert private == []
    others = {m.split(".")[0] for m, _ in imported} - {m.split(".")[0] for m, _ in ours}
    assert others <= set(sys.stdlib_module_names) | {"__future__"}


def test_its_entry_point_and_manifest_name_the_plugin() -> None:
    manifest = (PACKAGE / "pyproject.toml").read_text(encoding="utf-8")
    assert '[project.entry-points."walletcore.chains"]' in manifest
    assert 'l2chain = "walletcore_l2chain:PLUGIN"' in manifest
    spec = importlib.util.spec_from_file_location("_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    assert PACKAGE in dev.TEST_PACKAGES  # `python3 dev.py test` installs it


@pytest.fixture(scope="module")
def package() -> ModuleType:
    """The package loaded from its directory, whether or not it is installed."""
    spec = importlib.util.spec_from_file_location("_l2chain_from_source", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_defines_and_describes_a_chain_beside_the_contracts(package: ModuleType) -> None:
    plugin = package.PLUGIN
    assert isinstance(plugin, ChainPlugin) and plugin.name == "l2chain" and plugin.defines
    chain = package.BASECHAIN
    assert plugin.chains == {chain} and chain not in CONTRACT_CHAINS
    assert set(plugin.gateways) == {"rpc"}  # the EVM family's; no devnet of its own
    description = plugin.describes[chain]
    assert description is package.DESCRIPTION
    assert [(a.id, a.symbol, a.decimals) for a in description.assets] == [
        (8453, "ETH", 18),
        (84531, "USDC", 6),
    ]
    assert not {a.id for a in description.assets} & {a.id for a in CONTRACT_ASSETS}
    assert plugin.keys[chain].path == "m/44'/60'/0'/0/0"
    assert plugin.keys[chain].curve == "secp256k1"
    assert {n: c.chain_id for n, c in package.CHAIN.networks.items()} == {
        "mainnet": 8453,
        "testnet": 84532,
    }
