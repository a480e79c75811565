"""Fixtures of the chain adapter tests: an operator key and a fast sealed KeyStore."""

from __future__ import annotations

import secrets

import pytest

from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams

#: Argon2id at its cheapest, for tests that are not about the KDF cost.
FAST_KDF = KdfParams(opslimit=1, memlimit=64 * 1024)


@pytest.fixture
def master_key() -> bytes:
    return secrets.token_bytes(32)


@pytest.fixture
def keystore(master_key: bytes) -> SealedKeyStore:
    return SealedKeyStore(master_key, kdf=FAST_KDF, allow_weak_kdf=True)
