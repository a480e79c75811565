"""The sealed KeyStore: BIP39 seeds sealed under Argon2id(wallet password) or the master key.

- User wallets: Argon2id (64 MiB, 3 passes by default) derives the box key from the
  password; the parameters travel in the record (`walletcore_chains.sealing`).
- Platform wallets: sealed under the operator's 32-byte random master key (through a
  keyed BLAKE2b over the record header); no password and no Argon2 are involved.
- Secrets of the service's own (webhook signing secrets) are sealed under the master key
  too (`SecretSealer`: `seal_secret`, `open_secret`; `sealing` scheme 3). A record kept
  unsealed by a deployment that had no sealing keystore (first byte 0) still opens.
- Unsealed material lives for one call: a thread runs the KDF and the derivation, at most
  `max_concurrent_unseals` at a time, and wipes what it owns before returning.
- Entry point `walletcore.keystores: sealed`.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from walletcore.chainplugins import ChainDefinitions, ChainPlugin, KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.errors import WrongWalletPassword
from walletcore.ports import ChainSigner, KeyStore, NewWallet, SecretSealer, SignatureVerifier
from walletcore_chains import bclib, curves, hd, sealing
from walletcore_chains.sealing import KdfParams, SealedRecordError

T = TypeVar("T")


class KeyMaterialError(RuntimeError):
    """A library failed while it held key material. Its message is dropped (it may quote
    the material, as bitcoinlib's checksum error quotes the entropy); only its type is kept."""


class ChainKey(ChainSigner):
    """One chain's private key for the length of one `unseal` block (see `ChainSigner`).

    The chain's plugin says how: its key derivation (the curve signed on, the address of
    the public key) and its signature verifier; by default the installed plugin's that
    defines `chain`."""

    __slots__ = ("_keys", "_secret", "_verify", "_wiped", "address", "chain")

    def __init__(
        self,
        chain: Chain,
        secret: bytearray,
        keys: KeyDerivation | None = None,
        verify: SignatureVerifier | None = None,
    ) -> None:
        self.chain = chain
        self._secret = secret
        self._wiped = False
        if keys is None or verify is None:
            from walletcore.plugins import chain_definitions

            keys = keys or chain_definitions().derivation(chain)
            verify = verify or chain_definitions().verifier(chain)
        self._keys = keys
        self._verify = verify
        self.address = hd.address_of(keys, secret)

    def __repr__(self) -> str:
        state = "wiped" if self.wiped else "<hidden>"
        return f"ChainKey(chain={self.chain.value}, address={self.address}, key={state})"

    def __reduce__(self) -> Any:  # keep the key out of pickles and copies
        raise TypeError("a ChainKey cannot be pickled or copied")

    @property
    def wiped(self) -> bool:
        return self._wiped

    def sign(self, payload: bytes) -> bytes:
        """Sign (see `ChainSigner.sign`), and check the signature against `address` before
        handing it out."""
        if self.wiped:
            raise RuntimeError("this key was wiped when its unseal block ended")
        signature = self._sign(bytes(payload))
        if not self._verify(self.chain, self.address, payload, signature):
            raise RuntimeError(f"a {self.chain} signature failed its own check; not used")
        return signature

    def _sign(self, payload: bytes) -> bytes:
        """On the chain's curve: ed25519 over the message, or secp256k1 over each 32-byte
        digest (`r || s || recovery id`, low-S, as Bitcoin's policy and EIP-2 require)."""
        if self._keys.curve == "secp256k1":
            # one digest, or several (a BITCOIN transaction spending several coins of this
            # key has one per coin): one 65-byte signature each, in order. The chain's
            # verifier below must accept the batch, else nothing is handed out.
            if not payload or len(payload) % 32:
                raise ValueError(f"{self.chain} signs 32-byte digests")
            return b"".join(
                curves.sign("secp256k1", self._secret, payload[i : i + 32])
                for i in range(0, len(payload), 32)
            )
        return curves.sign(self._keys.curve, self._secret, payload)

    def wipe(self) -> None:
        hd.wipe(self._secret)
        self._wiped = True


class SealedKeyStore(KeyStore, SecretSealer):
    def __init__(
        self,
        master_key: bytes,
        *,
        max_concurrent_unseals: int = 4,
        kdf: KdfParams = sealing.PRODUCTION_KDF,
        allow_weak_kdf: bool = False,
        chains: ChainDefinitions | None = None,
    ) -> None:
        """`kdf` below `PRODUCTION_KDF` needs `allow_weak_kdf=True`: for tests only.
        `chains`: the plugins defining each chain's keys (default: the installed ones)."""
        if not isinstance(master_key, bytes) or len(master_key) != sealing.MASTER_KEY_BYTES:
            raise ValueError("the operator master key is 32 bytes")
        if not kdf.at_least(sealing.PRODUCTION_KDF) and not allow_weak_kdf:
            raise ValueError("Argon2id parameters below 64 MiB / 3 passes are for tests only")
        if max_concurrent_unseals < 1:
            raise ValueError("max_concurrent_unseals must be at least 1")
        self._master_key = master_key
        self._kdf = kdf
        self._slots = asyncio.Semaphore(max_concurrent_unseals)
        self._chains = chains

    def __repr__(self) -> str:
        return f"SealedKeyStore(kdf={self._kdf})"

    @property
    def kdf(self) -> KdfParams:
        return self._kdf

    def _definitions(self) -> ChainDefinitions:
        """The chains' definitions, looked up here rather than in the worker thread, so a
        missing plugin is a configuration error, not a key-material one."""
        if self._chains is None:
            from walletcore.plugins import chain_definitions

            self._chains = chain_definitions()
        return self._chains

    def _keys(self, chains: Collection[Chain]) -> dict[Chain, KeyDerivation]:
        definitions = self._definitions()
        return {Chain(chain): definitions.derivation(chain) for chain in chains}

    # -- the port -----------------------------------------------------------------------
    async def create_wallet(self, password: str, chains: Collection[Chain]) -> NewWallet:
        return await self._offload(self._create, password, tuple(chains), self._keys(chains))

    async def create_platform_wallet(self, chains: Collection[Chain]) -> NewWallet:
        return await self._offload(self._create, None, tuple(chains), self._keys(chains))

    async def derive_addresses(
        self, sealed: bytes, password: str | None, chains: Collection[Chain]
    ) -> Mapping[Chain, str]:
        keys = self._keys(chains)
        return await self._offload(self._derive, sealed, password, tuple(chains), keys)

    @asynccontextmanager
    async def unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AsyncIterator[ChainKey]:
        definition = self._definitions().plugin_of(chain)
        key = await self._offload(self._chain_key, sealed, password, Chain(chain), definition)
        try:
            yield key
        finally:
            key.wipe()

    # -- secrets of the service's own (`SecretSealer`) ----------------------------------
    def seal_secret(self, secret: bytes) -> bytes:
        return sealing.seal_secret(secret, self._master_key)

    def open_secret(self, sealed: bytes) -> bytes:
        if sealed[:1] == b"\x00":  # kept unsealed (`walletcore.services.webhooks.PlainSecrets`)
            return bytes(sealed[1:])
        return sealing.open_secret(sealed, self._master_key)

    # -- work done in a thread ----------------------------------------------------------
    def _create(
        self, password: str | None, chains: tuple[Chain, ...], keys: hd.Derivations
    ) -> NewWallet:
        mnemonic = hd.new_mnemonic()
        seed = bytearray(hd.seed_of_new_mnemonic(mnemonic))
        try:
            addresses = hd.derive_addresses(bytes(seed), chains, keys)
            # Open what we sealed before anyone is shown an address: a record that does not
            # give the seed back would lose every coin sent to the wallet. Under a password
            # that check reuses the one Argon2id run (`seal_with_password_checked`).
            if password is not None:
                sealed = sealing.seal_with_password_checked(seed, password, self._kdf)
            else:
                sealed = sealing.seal_with_master_key(seed, self._master_key)
                reopened = self._open(sealed, None)
                try:
                    if not hmac.compare_digest(bytes(reopened), bytes(seed)):
                        raise SealedRecordError("the sealed record did not open to its seed")
                finally:
                    hd.wipe(reopened)
        finally:
            hd.wipe(seed)
        return NewWallet(sealed, addresses, mnemonic if password is not None else None)

    def _derive(
        self,
        sealed: bytes,
        password: str | None,
        chains: tuple[Chain, ...],
        keys: hd.Derivations,
    ) -> dict[Chain, str]:
        seed = self._open(sealed, password)
        try:
            return hd.derive_addresses(bytes(seed), chains, keys)
        finally:
            hd.wipe(seed)

    def _chain_key(
        self, sealed: bytes, password: str | None, chain: Chain, definition: ChainPlugin[Any]
    ) -> ChainKey:
        keys = definition.keys[chain]
        seed = self._open(sealed, password)
        try:
            secret = hd.derive_private_key(bytes(seed), keys)
        finally:
            hd.wipe(seed)
        try:
            return ChainKey(chain, secret, keys, definition.verify_signature)
        except BaseException:
            hd.wipe(secret)
            raise

    def _open(self, sealed: bytes, password: str | None) -> bytearray:
        # The record says how it was sealed; the caller's password must agree with it, so a
        # user wallet never opens without its password.
        if password is None:
            return sealing.open_with_master_key(sealed, self._master_key)
        return sealing.open_with_password(sealed, password)

    # -- concurrency --------------------------------------------------------------------
    async def _offload(self, func: Callable[..., T], *args: Any) -> T:
        """Run `func` in a worker thread holding one of the unseal slots.

        The slot is released when the thread finishes, not when the caller stops waiting, so
        cancelled callers cannot push the number of Argon2 runs past the cap. A `ChainKey`
        nobody is waiting for any more is wiped.
        """
        await self._slots.acquire()
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(None, functools.partial(_guarded, func, *args))
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(_wipe_abandoned)
            raise


def _guarded(func: Callable[..., T], *args: Any) -> T:
    """Run `func`; an exception that is not ours leaves without its message or context."""
    try:
        return func(*args)
    except (WrongWalletPassword, SealedRecordError):
        raise
    except Exception as exc:  # noqa: BLE001 - any library failure, message dropped
        raise KeyMaterialError(f"{type(exc).__name__} while handling key material") from None


def _wipe_abandoned(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        result = future.result()
        if isinstance(result, ChainKey):
            result.wipe()


def build(
    *,
    settings: Any,
    master_key: bytes,
    chain_definitions: ChainDefinitions | None = None,
    **_: Any,
) -> SealedKeyStore:
    """Entry point `walletcore.keystores: sealed` (production Argon2id parameters).

    `chain_definitions`: the container's (the plugins that define each chain); without
    them, the installed plugins'.

    bitcoinlib (every seed's mnemonic, BITCOIN's keys) is imported here, when the service
    is built, not by a first request: a server's worker is warm before it takes traffic."""
    bclib.configure(settings.home)
    bclib.preload()
    return SealedKeyStore(
        master_key,
        max_concurrent_unseals=settings.max_concurrent_unseals,
        chains=chain_definitions,
    )


__all__ = ["ChainKey", "KeyMaterialError", "SealedKeyStore", "build"]
