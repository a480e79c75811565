"""Address encodings the chain plugins share: base58check (the `base58` package) and
segwit bech32 / bech32m (bitcoinlib, BIP173 and BIP350)."""

from __future__ import annotations

import base58

from walletcore_chains import bclib


def b58check_decode(text: str) -> bytes | None:
    """The payload of a base58check string (checksum verified), or None."""
    try:
        return base58.b58decode_check(text)
    except ValueError:  # not base58 (UnicodeEncodeError included), or a bad checksum
        return None


def segwit_decode(hrp: str, address: str) -> tuple[int, bytes] | None:
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


__all__ = ["b58check_decode", "segwit_decode"]
