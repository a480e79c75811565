"""No code switches on a chain's name: the core, the binding, the sandbox and the other
adapters ask the chain's `ChainDescription` (docs/chains.md, "Writing a chain plugin").

Read from the source's tokens (comments and strings do not count):

- `is Chain.X` / `is not Chain.X` nowhere: chains compare with `==` (an open chain type is
  equal to its name, never identical to a constant);
- a `Chain.X` constant only inside the plugin package that owns the chain.

Allowed elsewhere, and only there:

- `walletcore/domain/assets.py`: the contract's definition of the constants and of its
  sixteen assets;
- the core's test fakes, which may not import the plugins (the `core-pure` contract) and
  play the contract's chains as fixtures: `testing/chains.py` (the fake gateways' fees per
  chain and `RESIGNING_CHAINS`, checked against the descriptions in
  tests/unit/chains/test_chain_descriptions.py), `testing/keys.py` (the fake keystore's ed25519
  signature length on SOLANA), `testing/contracts/storage.py` (wallet addresses stored
  and read back) and `testing/contracts/deposits.py` (deposits, cursors and watched
  addresses of several chains stored and read back).
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: chain -> the package that owns its constant
OWNERS = {
    "BITCOIN": "walletcore_chains/bitcoin",
    "ETHEREUM": "walletcore_chains/evm",
    "BSC": "walletcore_chains/evm",
    "POLYGON": "walletcore_chains/evm",
    "TRON": "walletcore_chains/tron",
    "SOLANA": "walletcore_chains/solana",
}
#: files that may name any chain's constant (see the module's docstring)
ALLOWED = frozenset(
    {
        "walletcore/domain/assets.py",
        "walletcore/testing/chains.py",
        "walletcore/testing/keys.py",
        "walletcore/testing/contracts/storage.py",
        "walletcore/testing/contracts/deposits.py",
        "walletcore/testing/contracts/policies.py",
    }
)


def _code_tokens(path: Path) -> list[tokenize.TokenInfo]:
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT}
    skipped |= {tokenize.DEDENT, tokenize.STRING}
    with path.open("rb") as source:
        tokens = tokenize.tokenize(io.BytesIO(source.read()).readline)
        return [t for t in tokens if t.type not in skipped]


def chain_constants(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, NAME, compared by identity) of every `Chain.NAME` in the file's code."""
    tokens = _code_tokens(path)
    for i in range(len(tokens) - 2):
        name, dot, attr = tokens[i], tokens[i + 1], tokens[i + 2]
        if name.string != "Chain" or dot.string != "." or attr.type != tokenize.NAME:
            continue
        if not attr.string[:1].isupper() or attr.string != attr.string.upper():
            continue
        before = [t.string for t in tokens[max(0, i - 2) : i]]
        identity = before[-1:] == ["is"] or before == ["is", "not"]
        yield name.start[0], attr.string, identity


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_chain_is_compared_by_identity() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}: is Chain.{attr}"
        for path in _sources()
        for line, attr, identity in chain_constants(path)
        if identity
    ]
    assert not found, "compare chains with ==:\n" + "\n".join(found)


def test_a_chain_constant_is_named_only_by_its_plugin() -> None:
    found = []
    for path in _sources():
        where = path.relative_to(SRC).as_posix()
        if where in ALLOWED:
            continue
        for line, attr, _ in chain_constants(path):
            owner = OWNERS.get(attr)
            if owner is None or not where.startswith(owner + "/"):
                found.append(f"{where}:{line}: Chain.{attr} (owned by {owner or 'no plugin'})")
    assert not found, "ask the chain's description instead:\n" + "\n".join(found)


def test_the_scan_sees_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "# Chain.BITCOIN in a comment\n"
        'x = "Chain.TRON in a string"\n'
        "if chain is Chain.SOLANA or chain is not Chain.BSC:\n"
        "    y = Chain.ETHEREUM\n"
        "z = Chain(name).value\n"
    )
    assert list(chain_constants(sample)) == [
        (3, "SOLANA", True),
        (3, "BSC", True),
        (4, "ETHEREUM", False),
    ]
    assert all(path.is_file() for path in _sources()) and len(_sources()) > 100
