"""Locking scripts (scriptPubKey) of the addresses the validator accepts, built from the
address as it decodes it: P2PKH and P2SH (base58check, the network's version bytes), P2WPKH
and P2WSH (bech32, witness version 0), P2TR (bech32m, version 1).

Every network's: bitcoinlib, given an address, guesses its network from the prefix, and the
`m`/`n`/`2` prefixes are shared by testnet, testnet4, signet and regtest, so a regtest one
is not found. The transaction's outputs, the fee's size and the dust limit all use this.
"""

from __future__ import annotations

from walletcore_chains.bitcoin.network import BitcoinNetwork
from walletcore_chains.encodings import b58check_decode, segwit_decode

#: OP_0, and OP_1 .. OP_16 are 0x51 .. 0x60: a witness version's opcode
_OP_0, _OP_N = 0x00, 0x50
_OP_DUP, _OP_HASH160, _OP_EQUAL, _OP_EQUALVERIFY, _OP_CHECKSIG = 0x76, 0xA9, 0x87, 0x88, 0xAC
_HASH160 = 20


def locking_script(network: BitcoinNetwork, address: str) -> bytes:
    """The locking script paying `address`, an address of `network`; ValueError for any
    other (the validator refused it before)."""
    decoded = segwit_decode(network.hrp, address)
    if decoded is not None:
        version, program = decoded
        return bytes([_OP_N + version if version else _OP_0, len(program)]) + program
    payload = b58check_decode(address)
    if payload is not None and len(payload) == 1 + _HASH160:
        version_byte, digest = payload[0], payload[1:]
        if version_byte == network.p2pkh:
            return (
                bytes([_OP_DUP, _OP_HASH160, _HASH160])
                + digest
                + bytes([_OP_EQUALVERIFY, _OP_CHECKSIG])
            )
        if version_byte == network.p2sh:
            return bytes([_OP_HASH160, _HASH160]) + digest + bytes([_OP_EQUAL])
    raise ValueError(f"not a {network.name} address")


def is_witness(script: bytes) -> bool:
    """Whether a locking script is a witness program (a version opcode, then 2 to 40 bytes
    pushed): what the node's dust limit counts as spent by a witness."""
    if not 4 <= len(script) <= 42 or script[1] != len(script) - 2:
        return False
    return script[0] == _OP_0 or _OP_N + 1 <= script[0] <= _OP_N + 16


__all__ = ["is_witness", "locking_script"]
