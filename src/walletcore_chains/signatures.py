"""Checking a signature against an address: `verify_signature`.

A `ChainKey` checks every signature it makes this way before handing it out, so a signing
fault (or a key that does not belong to the address) never reaches a transaction.
"""

from __future__ import annotations

from walletcore.domain.assets import Chain
from walletcore_chains import bclib

#: secp256k1 group order.
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    """Whether `signature` over `payload` was made by the key of `address` on `chain`.

    The forms are those of `ChainSigner.sign`: 65 bytes `r || s || recovery id` over a
    32-byte digest on secp256k1 chains (low-S only), 64 bytes ed25519 over the message on
    SOLANA.
    """
    if chain is Chain.SOLANA:
        return _verify_ed25519(address, payload, signature)
    recovered = _recover_secp256k1(chain, payload, signature)
    return recovered is not None and recovered == address


def _verify_ed25519(address: str, payload: bytes, signature: bytes) -> bool:
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey
    from solders.pubkey import Pubkey

    if len(signature) != 64:
        return False
    try:
        public = bytes(Pubkey.from_string(address))
    except ValueError:  # not base58, or not 32 bytes
        return False
    try:
        VerifyKey(public).verify(bytes(payload), bytes(signature))
    except BadSignatureError:
        return False
    return True


def _recover_secp256k1(chain: Chain, digest: bytes, signature: bytes) -> str | None:
    from eth_keys.datatypes import Signature
    from eth_keys.exceptions import BadSignature

    if len(digest) != 32 or len(signature) != 65 or signature[64] not in (0, 1):
        return None
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")
    if not (0 < r < SECP256K1_N and 0 < s <= SECP256K1_N // 2):
        return None
    try:
        public = Signature(vrs=(signature[64], r, s)).recover_public_key_from_msg_hash(
            bytes(digest)
        )
    except (BadSignature, ValueError):
        return None
    if chain is Chain.BITCOIN:
        key = bclib.keys().Key(public.to_compressed_bytes(), network="bitcoin")
        address: str = key.address(script_type="p2wpkh", encoding="bech32")
        return address
    if chain is Chain.TRON:
        from tronpy.keys import public_key_to_base58check_addr  # type: ignore[import-untyped]

        return str(public_key_to_base58check_addr(public.to_bytes()))
    return str(public.to_checksum_address())
