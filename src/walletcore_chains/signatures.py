"""Checking a signature against an address on any chain: `verify_signature`, the verifier
of the chain plugin that defines the chain.

A `ChainKey` checks every signature it makes this way before handing it out, so a signing
fault (or a key that does not belong to the address) never reaches a transaction.
"""

from __future__ import annotations

from walletcore.domain.assets import Chain
from walletcore.plugins import chain_definitions
from walletcore_chains.curves import SECP256K1_N


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    """Whether `signature` over `payload` was made by the key of `address` on `chain`.

    The forms are those of `ChainSigner.sign`: 65 bytes `r || s || recovery id` over a
    32-byte digest on secp256k1 chains (low-S only), 64 bytes ed25519 over the message on
    SOLANA.
    """
    chain = Chain(chain)
    return chain_definitions().verifier(chain)(chain, address, payload, signature)


__all__ = ["SECP256K1_N", "verify_signature"]
