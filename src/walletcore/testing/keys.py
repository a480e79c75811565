"""`FakeKeyStore`: a KeyStore for tests of code that embeds the core without the chain
libraries. A FAKE: never use it where money moves.

- It seals nothing: the "seed" (random bytes) sits in the clear in the sealed record, next
  to a SHA-256 of the password. Anyone with the record holds the "key".
- Its addresses are `fake-<chain>-<hex>`: no chain accepts them, so nothing can be sent to
  a wallet it made, and no key of any chain stands behind them.
- Its signatures are HMACs of the payload, the length a chain expects and valid on none.
- It is no entry point of `walletcore.keystores`: `WALLETCORE_KEYSTORE` cannot choose it,
  only code that passes it in (`create_container(keystore=FakeKeyStore())`).

It keeps the KeyStore's rules that a use case sees: a mnemonic only for user wallets, a
wrong password is `WrongWalletPassword` (checked even when no chain is derived), a signer
names its chain and address and refuses to sign after its block.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import unicodedata
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import chain_order
from walletcore.domain.errors import WrongWalletPassword
from walletcore.ports.keys import ChainSigner, KeyStore, NewWallet

_MAGIC = b"walletcore-FAKE-keystore\x00"
#: Signature lengths of `ChainSigner.sign`: ed25519 on SOLANA, r || s || v elsewhere.
_SIGNATURE_BYTES = {Chain.SOLANA: 64}


class FakeKeyStore(KeyStore):
    """A FAKE KeyStore (see the module): deterministic fake addresses, no cryptography
    worth the name. `unseals` counts the signers it handed out."""

    def __init__(self) -> None:
        self.unseals = 0

    def __repr__(self) -> str:
        return "FakeKeyStore(FAKE: not for production)"

    async def create_wallet(self, password: str, chains: Collection[Chain]) -> NewWallet:
        seed = secrets.token_bytes(16)
        mnemonic = " ".join(["fake"] * 11 + [seed.hex()])
        return NewWallet(_seal(seed, password), _addresses(seed, chains), mnemonic)

    async def create_platform_wallet(self, chains: Collection[Chain]) -> NewWallet:
        seed = secrets.token_bytes(16)
        return NewWallet(_seal(seed, None), _addresses(seed, chains))

    async def derive_addresses(
        self, sealed: bytes, password: str | None, chains: Collection[Chain]
    ) -> Mapping[Chain, str]:
        return _addresses(_open(sealed, password), chains)

    def unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AbstractAsyncContextManager[ChainSigner]:
        return self._unseal(sealed, password, chain)

    @asynccontextmanager
    async def _unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AsyncIterator[ChainSigner]:
        signer = FakeSigner(chain, _open(sealed, password))
        self.unseals += 1
        try:
            yield signer
        finally:
            signer.wipe()


class FakeSigner(ChainSigner):
    """The fake key of one chain for one `unseal` block: signs with an HMAC, then refuses."""

    def __init__(self, chain: Chain, seed: bytes) -> None:
        self.chain = chain
        self.address = fake_address(seed, chain)
        self._seed: bytes | None = seed

    def __repr__(self) -> str:
        return f"FakeSigner(chain={self.chain.value}, address={self.address})"

    def sign(self, payload: bytes) -> bytes:
        if self._seed is None:
            raise RuntimeError("the signer's block ended: it cannot sign any more")
        size = _SIGNATURE_BYTES.get(self.chain, 65)
        mac = hmac.new(self._seed, self.chain.value.encode() + payload, hashlib.sha512)
        return mac.digest()[:size].ljust(size, b"\x00")

    def wipe(self) -> None:
        self._seed = None


def fake_address(seed: bytes, chain: Chain) -> str:
    """`fake-<chain>-<40 hex>`: valid on no chain."""
    digest = hashlib.sha256(seed + chain.value.encode()).hexdigest()[:40]
    return f"fake-{chain.value.lower()}-{digest}"


def _addresses(seed: bytes, chains: Collection[Chain]) -> dict[Chain, str]:
    return {chain: fake_address(seed, chain) for chain in sorted(set(chains), key=chain_order)}


def _password_hash(password: str | None) -> str | None:
    if password is None:
        return None
    return hashlib.sha256(unicodedata.normalize("NFC", password).encode()).hexdigest()


def _seal(seed: bytes, password: str | None) -> bytes:
    record = {"seed": seed.hex(), "password": _password_hash(password)}
    return _MAGIC + json.dumps(record).encode()


def _open(sealed: bytes, password: str | None) -> bytes:
    if not sealed.startswith(_MAGIC):
        raise WrongWalletPassword()  # not a record of this fake
    record = json.loads(sealed[len(_MAGIC) :])
    expected, given = record["password"], _password_hash(password)
    if (expected is None) != (given is None) or (
        expected is not None and not hmac.compare_digest(str(expected), str(given))
    ):
        raise WrongWalletPassword()
    return bytes.fromhex(record["seed"])


__all__ = ["FakeKeyStore", "FakeSigner", "fake_address"]
