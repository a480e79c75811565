"""validate_address: mainnet forms, checksums, and clear refusals, per chain."""

from __future__ import annotations

import secrets

import pytest

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains import addresses
from walletcore_chains.addresses import b58check_encode, segwit_encode, validate_address

EIP55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55's own example


def _bech32_with_wrong_constant(version: int, program: bytes) -> str:
    """A segwit address whose checksum uses the other algorithm (BIP350's invalid cases)."""
    real = (addresses._BECH32_CONST, addresses._BECH32M_CONST)
    try:
        addresses._BECH32_CONST, addresses._BECH32M_CONST = real[1], real[0]
        return segwit_encode("bc", version, program)
    finally:
        addresses._BECH32_CONST, addresses._BECH32M_CONST = real


# -- BITCOIN ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        # BIP173: P2WPKH, upper case accepted and lowered; P2WSH
        (
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
        ),
        (
            "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
        ),
        (
            "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
            "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
        ),
        # BIP350 / BIP86: taproot (bech32m)
        (
            "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr",
            "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr",
        ),
        # base58 P2PKH and P2SH
        ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"),
        ("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"),
        (
            "  bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu\n",
            "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
        ),
    ],
)
def test_bitcoin_valid(given: str, normalised: str) -> None:
    assert validate_address(Chain.BITCOIN, given) == normalised


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "checksum"),
        ("bc1qW508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "checksum"),  # mixed case
        ("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", "testnet"),
        ("bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", "testnet"),
        ("bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs", "witness version 2"),  # BIP350, v2
        ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3", "checksum"),
        ("mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn", "mainnet"),  # testnet P2PKH
        ("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", "mainnet"),  # a TRON address
        ("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", "base58check"),
        ("bc1q", "bech32"),
    ],
)
def test_bitcoin_invalid(given: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_address(Chain.BITCOIN, given)
    assert caught.value.message.startswith("Invalid BITCOIN address")
    assert reason in caught.value.message


def test_bitcoin_refuses_the_wrong_checksum_algorithm_for_the_version() -> None:
    program = secrets.token_bytes(32)
    assert validate_address(Chain.BITCOIN, segwit_encode("bc", 1, program)).startswith("bc1p")
    with pytest.raises(InvalidRequest):  # v1 with bech32 instead of bech32m
        validate_address(Chain.BITCOIN, _bech32_with_wrong_constant(1, program))
    with pytest.raises(InvalidRequest):  # v0 with bech32m instead of bech32
        validate_address(Chain.BITCOIN, _bech32_with_wrong_constant(0, program[:20]))


def test_bitcoin_refuses_other_base58_versions() -> None:
    litecoin = b58check_encode(bytes([0x30]) + secrets.token_bytes(20))
    with pytest.raises(InvalidRequest, match="mainnet P2PKH or P2SH"):
        validate_address(Chain.BITCOIN, litecoin)


# -- EVM ------------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", [Chain.ETHEREUM, Chain.BSC, Chain.POLYGON])
@pytest.mark.parametrize("given", [EIP55, EIP55.lower(), "0x" + EIP55[2:].upper()])
def test_evm_valid_forms_normalise_to_eip55(chain: Chain, given: str) -> None:
    assert validate_address(chain, given) == EIP55


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        (EIP55[:-1] + "D", "checksum"),  # one letter's case flipped
        (EIP55[2:], "0x and 40 hex"),
        (EIP55[:-1], "0x and 40 hex"),
        (EIP55 + "0", "0x and 40 hex"),
        ("0x" + "g" * 40, "0x and 40 hex"),
        ("0X" + EIP55[2:], "0x and 40 hex"),
        ("0x" + "0" * 40, "zero address"),
    ],
)
def test_evm_invalid(given: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_address(Chain.POLYGON, given)
    assert caught.value.message.startswith("Invalid POLYGON address")
    assert reason in caught.value.message


# -- TRON ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given", ["TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"]
)
def test_tron_valid(given: str) -> None:
    assert validate_address(Chain.TRON, given) == given


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdJ", "base58check"),  # checksum
        ("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYd", "base58check"),  # 33 characters
        ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "not a mainnet address"),  # bitcoin, 34 chars
        ("41" + "ab" * 20, "base58check"),  # hex form
        ("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", "base58check"),
    ],
)
def test_tron_invalid(given: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_address(Chain.TRON, given)
    assert caught.value.message.startswith("Invalid TRON address")
    assert reason in caught.value.message


# -- SOLANA -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given",
    ["HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"],
)
def test_solana_valid(given: str) -> None:
    assert validate_address(Chain.SOLANA, given) == given


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpq0", "base58"),  # '0' is not base58
        ("HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKp", "32-byte"),  # 31 bytes
        ("HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqkk", "32-byte"),  # too long
        ("1" * 32, "system program"),
        ("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", "32-byte"),
    ],
)
def test_solana_invalid(given: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_address(Chain.SOLANA, given)
    assert caught.value.message.startswith("Invalid SOLANA address")
    assert reason in caught.value.message


# -- any chain ------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", list(Chain))
@pytest.mark.parametrize("given", [None, "", "   ", 42, b"bc1q"])
def test_a_missing_or_non_text_address_is_refused(chain: Chain, given: object) -> None:
    with pytest.raises(InvalidRequest, match=f"A {chain} address is required"):
        validate_address(chain, given)


def test_chain_names_are_accepted_as_strings() -> None:
    assert validate_address("ETHEREUM", EIP55.lower()) == EIP55  # type: ignore[arg-type]


def test_base58_round_trip_keeps_leading_zeros() -> None:
    data = b"\0\0" + secrets.token_bytes(30)
    assert addresses.b58decode(addresses.b58encode(data)) == data
