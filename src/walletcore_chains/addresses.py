"""Recipient address validation per chain, mainnet forms only: `validate_address`.

Checks the encoding and its checksum, never whether the address exists on chain. Libraries
decode: bitcoinlib's bech32 / bech32m (BIP173, BIP350), the `base58` package (base58check),
solders (Solana public keys) and eth-utils (EIP-55); this module says which forms are
accepted on mainnet.
"""

from __future__ import annotations

import re

import base58

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains import bclib


def _b58check_decode(text: str) -> bytes | None:
    """The payload of a base58check string (checksum verified), or None."""
    try:
        return base58.b58decode_check(text)
    except ValueError:  # not base58 (UnicodeEncodeError included), or a bad checksum
        return None


def _segwit_decode(hrp: str, address: str) -> tuple[int, bytes] | None:
    """(witness version, program) of a segwit address with this `hrp`, or None.

    bitcoinlib checks the characters, case, length, the checksum (bech32 for version 0 and
    bech32m for versions 1 to 16, as BIP350 requires) and the program's length.
    """
    encoding = bclib.encoding()
    try:
        script = encoding.addr_bech32_to_pubkeyhash(address, prefix=hrp, include_witver=True)
    except (encoding.EncodingError, ValueError):
        return None
    # The witness script: OP_0 or OP_1..OP_16 (0x51..0x60), the program's length, the program.
    opcode = script[0]
    return (opcode - 0x50 if opcode else 0), bytes(script[2:])


# -- per chain ----------------------------------------------------------------------------
_EVM_RE = re.compile(r"\A0x[0-9a-fA-F]{40}\Z")
_BTC_TESTNET_HRPS = ("tb1", "bcrt1")
_BTC_P2PKH, _BTC_P2SH = 0x00, 0x05
_TRON_PREFIX = 0x41


def validate_address(chain: Chain, address: object) -> str:
    """The address in its normalised mainnet form, or `InvalidRequest` saying what is wrong.

    - BITCOIN: bech32 P2WPKH/P2WSH (v0), bech32m P2TR (v1), base58 P2PKH (`1...`) or
      P2SH (`3...`); checksums verified; normalised to lower case for bech32. Witness
      versions 2 to 16 are refused: nothing can spend them yet, so coins sent there are lost.
    - ETHEREUM, BSC, POLYGON: `0x` and 40 hex digits; mixed case must carry a valid EIP-55
      checksum; the zero address is refused; normalised to the EIP-55 form.
    - TRON: base58check, 34 characters, version byte 0x41 (`T...`).
    - SOLANA: base58 of a 32-byte public key, canonical encoding; the all-zero key (the
      system program) is refused.

    Surrounding whitespace is ignored.
    """
    chain = Chain(chain)
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {chain} address is required")
    text = address.strip()
    if chain is Chain.BITCOIN:
        return _bitcoin(text)
    if chain is Chain.TRON:
        return _tron(text)
    if chain is Chain.SOLANA:
        return _solana(text)
    return _evm(chain, text)


def _bitcoin(text: str) -> str:
    lowered = text.lower()
    if lowered.startswith(_BTC_TESTNET_HRPS):
        raise InvalidRequest("Invalid BITCOIN address: testnet addresses are not accepted")
    if lowered.startswith("bc1"):
        decoded = _segwit_decode("bc", text)
        if decoded is None:
            raise InvalidRequest("Invalid BITCOIN address: bad bech32 encoding or checksum")
        version, program = decoded
        if version > 1 or (version == 1 and len(program) != 32):
            raise InvalidRequest(
                f"Invalid BITCOIN address: witness version {version} is not spendable yet"
            )
        return lowered
    payload = _b58check_decode(text) if len(text) <= 35 else None
    if payload is None:
        raise InvalidRequest("Invalid BITCOIN address: bad base58check encoding or checksum")
    if len(payload) != 21 or payload[0] not in (_BTC_P2PKH, _BTC_P2SH):
        raise InvalidRequest("Invalid BITCOIN address: not a mainnet P2PKH or P2SH address")
    return text


def _evm(chain: Chain, text: str) -> str:
    from eth_utils.address import to_checksum_address

    if not _EVM_RE.match(text):
        raise InvalidRequest(f"Invalid {chain} address: expected 0x and 40 hex digits")
    checksummed = str(to_checksum_address(text))
    body = text[2:]
    if body != body.lower() and body != body.upper() and text != checksummed:
        raise InvalidRequest(f"Invalid {chain} address: EIP-55 checksum mismatch")
    if int(body, 16) == 0:
        raise InvalidRequest(f"Invalid {chain} address: the zero address cannot receive funds")
    return checksummed


def _tron(text: str) -> str:
    payload = _b58check_decode(text) if len(text) == 34 else None
    if payload is None:
        raise InvalidRequest("Invalid TRON address: expected 34 base58check characters")
    if len(payload) != 21 or payload[0] != _TRON_PREFIX:
        raise InvalidRequest("Invalid TRON address: not a mainnet address (T...)")
    return text


def _solana(text: str) -> str:
    from solders.pubkey import Pubkey

    try:
        key = Pubkey.from_string(text) if 32 <= len(text) <= 44 else None
    except ValueError:  # not base58, or not 32 bytes
        key = None
    if key is None or str(key) != text:  # the canonical encoding only
        raise InvalidRequest("Invalid SOLANA address: expected a base58 32-byte public key")
    if key == Pubkey.default():
        raise InvalidRequest("Invalid SOLANA address: the system program cannot receive funds")
    return text
