"""validate_address: mainnet forms, checksums, and clear refusals, per chain."""

from __future__ import annotations

import secrets

import base58
import pytest
from solders.pubkey import Pubkey

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains import bclib
from walletcore_chains.addresses import validate_address

EIP55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55's own example


def segwit_address(version: int, program: bytes) -> str:
    """A mainnet segwit address (bech32 for v0, bech32m after), by bitcoinlib."""
    return str(bclib.encoding().pubkeyhash_to_addr_bech32(program, prefix="bc", witver=version))


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


def test_bitcoin_accepts_fresh_segwit_programs() -> None:
    program = secrets.token_bytes(32)
    assert validate_address(Chain.BITCOIN, segwit_address(1, program)).startswith("bc1p")
    assert validate_address(Chain.BITCOIN, segwit_address(0, program)).startswith("bc1q")
    assert validate_address(Chain.BITCOIN, segwit_address(0, program[:20])).startswith("bc1q")


@pytest.mark.parametrize(
    "given",
    [
        # BIP350's invalid addresses on mainnet; the first three use the checksum algorithm
        # of the other witness versions (bech32 for v1 and v16, bech32m for v0).
        "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd",
        "BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL",
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh",
        "bc1p38j9r5y49hruaue7wxjce0updqjuyyx0kh56v8s25huc6995vvpql3jow4",  # 'o' in checksum
        "BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R",  # version 17
        "bc1pw5dgrnzv",  # a 1-byte program
        "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav",  # 41
        "BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P",  # v0 with 16 bytes (BIP141)
        "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf",  # zero padding > 4
        "bc1gmk9yu",  # empty data
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4" + "q" * 60,  # over 90 characters
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3té",
    ],
)
def test_bitcoin_refuses_bip350_invalid_addresses(given: str) -> None:
    with pytest.raises(InvalidRequest, match="Invalid BITCOIN address"):
        validate_address(Chain.BITCOIN, given)


def test_bitcoin_refuses_other_base58_versions() -> None:
    litecoin = base58.b58encode_check(bytes([0x30]) + secrets.token_bytes(20)).decode()
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
        ("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdé", "base58check"),  # not ASCII
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
        ("HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqé", "32-byte"),  # not ASCII
    ],
)
def test_solana_invalid(given: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_address(Chain.SOLANA, given)
    assert caught.value.message.startswith("Invalid SOLANA address")
    assert reason in caught.value.message


# -- any chain ------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", list(CONTRACT_CHAINS))
@pytest.mark.parametrize("given", [None, "", "   ", 42, b"bc1q"])
def test_a_missing_or_non_text_address_is_refused(chain: Chain, given: object) -> None:
    with pytest.raises(InvalidRequest, match=f"A {chain} address is required"):
        validate_address(chain, given)


def test_chain_names_are_accepted_as_strings() -> None:
    assert validate_address("ETHEREUM", EIP55.lower()) == EIP55  # type: ignore[arg-type]


def test_solana_keys_with_leading_zero_bytes_are_valid() -> None:
    """Base58 writes each leading zero byte as '1'; such keys are canonical all the same."""
    key = str(Pubkey(b"\0\0" + secrets.token_bytes(30)))
    assert key.startswith("11")
    assert validate_address(Chain.SOLANA, key) == key
    with pytest.raises(InvalidRequest, match="32-byte"):
        validate_address(Chain.SOLANA, "1" + key)  # one zero byte too many
