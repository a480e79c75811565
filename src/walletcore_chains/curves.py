"""Keys on the two curves the chains use, for the chain plugins and the sealed KeyStore.

- secp256k1 (BITCOIN, the EVM chains, TRON): public keys as 33 bytes compressed SEC1;
  signatures over a 32-byte digest as 65 bytes `r || s || recovery id`, low-S only (as
  Bitcoin's policy and EIP-2 require).
- ed25519 (SOLANA): 32-byte public keys; 64-byte signatures over the message itself.

Libraries do the work: eth-keys (secp256k1) and PyNaCl (ed25519), imported when used.
"""

from __future__ import annotations

from collections.abc import Callable

from walletcore.chainplugins import Curve

#: secp256k1 group order.
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def public_key(curve: Curve, secret: bytes | bytearray) -> bytes:
    """The public key of a 32-byte private key (secp256k1 scalar, or ed25519 seed)."""
    if curve == "ed25519":
        from nacl.signing import SigningKey

        return bytes(SigningKey(bytes(secret)).verify_key.encode())
    from eth_keys.datatypes import PrivateKey

    return bytes(PrivateKey(bytes(secret)).public_key.to_compressed_bytes())


def sign(curve: Curve, secret: bytes | bytearray, payload: bytes) -> bytes:
    """The signature of `payload` (a 32-byte digest on secp256k1)."""
    if curve == "ed25519":
        from nacl.signing import SigningKey

        return bytes(SigningKey(bytes(secret)).sign(bytes(payload)).signature)
    if len(payload) != 32:
        raise ValueError("secp256k1 keys sign a 32-byte digest")
    from eth_keys.datatypes import PrivateKey

    signature = PrivateKey(bytes(secret)).sign_msg_hash(bytes(payload))
    r, s, recovery = int(signature.r), int(signature.s), int(signature.v)
    if s > SECP256K1_N // 2:  # low-S
        s, recovery = SECP256K1_N - s, recovery ^ 1
    return r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([recovery])


def recover_secp256k1(digest: bytes, signature: bytes) -> bytes | None:
    """The compressed public key that made `signature` over `digest`, or None (malformed,
    high-S, or no key)."""
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
    return bytes(public.to_compressed_bytes())


def verify_secp256k1(
    address_of: Callable[[bytes], str], address: str, digest: bytes, signature: bytes
) -> bool:
    """Whether the key of `address` (by `address_of` its public key) made `signature`."""
    public = recover_secp256k1(digest, signature)
    return public is not None and address_of(public) == address


def verify_ed25519(public: bytes, payload: bytes, signature: bytes) -> bool:
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    if len(signature) != 64 or len(public) != 32:
        return False
    try:
        VerifyKey(bytes(public)).verify(bytes(payload), bytes(signature))
    except BadSignatureError:
        return False
    return True


def uncompressed(public: bytes) -> bytes:
    """The 64 bytes `x || y` of a compressed secp256k1 public key."""
    from eth_keys.datatypes import PublicKey

    return bytes(PublicKey.from_compressed_bytes(bytes(public)).to_bytes())


__all__ = [
    "SECP256K1_N",
    "public_key",
    "recover_secp256k1",
    "sign",
    "uncompressed",
    "verify_ed25519",
    "verify_secp256k1",
]
