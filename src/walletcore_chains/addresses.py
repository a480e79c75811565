"""Recipient address validation per chain, mainnet forms only: `validate_address`.

Checks the encoding and its checksum, never whether the address exists on chain. Bech32 and
base58 are implemented here from their specifications (BIP173, BIP350, base58check) with the
standard library; EIP-55 needs keccak-256, which eth-utils provides.
"""

from __future__ import annotations

import hashlib
import re

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest

# -- base58 -------------------------------------------------------------------------------
B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(B58_ALPHABET)}


def b58encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    out = []
    while number:
        number, rem = divmod(number, 58)
        out.append(B58_ALPHABET[rem])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(out))


def b58decode(text: str) -> bytes | None:
    """The bytes, or None when `text` is not base58."""
    number = 0
    for char in text:
        digit = _B58_INDEX.get(char)
        if digit is None:
            return None
        number = number * 58 + digit
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + body


def b58check_decode(text: str) -> bytes | None:
    """The payload of a base58check string (checksum verified), or None."""
    raw = b58decode(text)
    if raw is None or len(raw) < 5:
        return None
    payload, checksum = raw[:-4], raw[-4:]
    if hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != checksum:
        return None
    return payload


def b58check_encode(payload: bytes) -> str:
    return b58encode(payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4])


# -- bech32 / bech32m (BIP173, BIP350 reference algorithm) --------------------------------
_BECH32_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_CONST, _BECH32M_CONST = 1, 0x2BC830A3


def _polymod(values: list[int]) -> int:
    generator = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    chk = 1
    for value in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ value
        for i in range(5):
            chk ^= generator[i] if ((top >> i) & 1) else 0
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _convertbits(data: list[int], frombits: int, tobits: int, pad: bool) -> list[int] | None:
    acc, bits, out = 0, 0, []
    maxv = (1 << tobits) - 1
    for value in data:
        if value < 0 or value >> frombits:
            return None
        acc = (acc << frombits) | value
        bits += frombits
        while bits >= tobits:
            bits -= tobits
            out.append((acc >> bits) & maxv)
    if pad:
        if bits:
            out.append((acc << (tobits - bits)) & maxv)
    elif bits >= frombits or ((acc << (tobits - bits)) & maxv):
        return None
    return out


def segwit_decode(hrp: str, address: str) -> tuple[int, bytes] | None:
    """(witness version, program) of a segwit address with this `hrp`, or None.

    Bech32 for version 0 and bech32m for versions 1 to 16, as BIP350 requires.
    """
    if any(ord(c) < 33 or ord(c) > 126 for c in address) or len(address) > 90:
        return None
    if address.lower() != address and address.upper() != address:
        return None  # mixed case
    address = address.lower()
    pos = address.rfind("1")
    if pos < 1 or pos + 7 > len(address) or address[:pos] != hrp:
        return None
    if any(c not in _BECH32_CHARSET for c in address[pos + 1 :]):
        return None
    data = [_BECH32_CHARSET.find(c) for c in address[pos + 1 :]]
    const = _polymod(_hrp_expand(hrp) + data)
    if const not in (_BECH32_CONST, _BECH32M_CONST):
        return None
    values = data[:-6]
    if not values:
        return None
    version = values[0]
    program = _convertbits(values[1:], 5, 8, False)
    if version > 16 or program is None or not 2 <= len(program) <= 40:
        return None
    if version == 0 and len(program) not in (20, 32):
        return None
    if (version == 0) != (const == _BECH32_CONST):
        return None
    return version, bytes(program)


def segwit_encode(hrp: str, version: int, program: bytes) -> str:
    const = _BECH32_CONST if version == 0 else _BECH32M_CONST
    data = [version] + (_convertbits(list(program), 8, 5, True) or [])
    values = _hrp_expand(hrp) + data
    polymod = _polymod(values + [0] * 6) ^ const
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_BECH32_CHARSET[d] for d in data + checksum)


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
        decoded = segwit_decode("bc", text)
        if decoded is None:
            raise InvalidRequest("Invalid BITCOIN address: bad bech32 encoding or checksum")
        version, program = decoded
        if version > 1 or (version == 1 and len(program) != 32):
            raise InvalidRequest(
                f"Invalid BITCOIN address: witness version {version} is not spendable yet"
            )
        return lowered
    payload = b58check_decode(text) if len(text) <= 35 else None
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
    payload = b58check_decode(text) if len(text) == 34 else None
    if payload is None:
        raise InvalidRequest("Invalid TRON address: expected 34 base58check characters")
    if len(payload) != 21 or payload[0] != _TRON_PREFIX:
        raise InvalidRequest("Invalid TRON address: not a mainnet address (T...)")
    return text


def _solana(text: str) -> str:
    raw = b58decode(text) if 32 <= len(text) <= 44 else None
    if raw is None or len(raw) != 32 or b58encode(raw) != text:
        raise InvalidRequest("Invalid SOLANA address: expected a base58 32-byte public key")
    if not any(raw):
        raise InvalidRequest("Invalid SOLANA address: the system program cannot receive funds")
    return text
