"""The sealed KeyStore: wallets, unsealing, signing, KDF cost and the concurrency cap."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import base58
import pytest
from eth_keys.datatypes import Signature as EthSignature
from eth_utils.crypto import keccak
from nacl.signing import VerifyKey

from walletcore import plugins
from walletcore.clock import SystemClock
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.errors import WrongWalletPassword
from walletcore.settings import Settings
from walletcore_chains import bclib, hd, sealing
from walletcore_chains.keystore import ChainKey, KeyMaterialError, SealedKeyStore
from walletcore_chains.sealing import KdfParams, SealedRecordError
from walletcore_chains.signatures import SECP256K1_N, verify_signature

PASSWORD = "correct horse battery staple"
ALL = list(CONTRACT_CHAINS)


# -- creating -----------------------------------------------------------------------------
async def test_a_user_wallet_shows_its_mnemonic_and_seals_its_seed(
    keystore: SealedKeyStore,
) -> None:
    wallet = await keystore.create_wallet(PASSWORD, [Chain.BITCOIN, Chain.TRON])
    assert wallet.mnemonic is not None and len(wallet.mnemonic.split()) == 24
    assert list(wallet.addresses) == [Chain.BITCOIN, Chain.TRON]
    seed = hd.seed_from_mnemonic(wallet.mnemonic)
    assert hd.derive_addresses(seed, [Chain.BITCOIN, Chain.TRON]) == wallet.addresses
    assert bytes(sealing.open_with_password(wallet.sealed, PASSWORD)) == seed
    assert sealing.record_params(wallet.sealed) == keystore.kdf
    assert wallet.mnemonic not in repr(wallet) and seed.hex() not in repr(wallet)


async def test_every_wallet_has_its_own_seed(keystore: SealedKeyStore) -> None:
    first = await keystore.create_wallet(PASSWORD, ALL)
    second = await keystore.create_wallet(PASSWORD, ALL)
    assert first.mnemonic != second.mnemonic
    assert set(first.addresses.values()).isdisjoint(second.addresses.values())


async def test_derive_addresses_gives_back_the_same_addresses(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, [Chain.ETHEREUM])
    derived = await keystore.derive_addresses(wallet.sealed, PASSWORD, ALL)
    assert derived[Chain.ETHEREUM] == wallet.addresses[Chain.ETHEREUM]
    assert set(derived) == set(ALL)


async def test_a_platform_wallet_is_sealed_under_the_master_key(
    keystore: SealedKeyStore, master_key: bytes
) -> None:
    wallet = await keystore.create_platform_wallet(ALL)
    assert wallet.mnemonic is None
    assert sealing.scheme_of(wallet.sealed) == sealing.SCHEME_OPERATOR
    assert await keystore.derive_addresses(wallet.sealed, None, ALL) == wallet.addresses
    other = SealedKeyStore(b"\7" * 32, kdf=keystore.kdf, allow_weak_kdf=True)
    with pytest.raises(SealedRecordError, match="master key"):
        await other.derive_addresses(wallet.sealed, None, ALL)
    with pytest.raises(SealedRecordError):  # a password never opens a platform wallet
        await keystore.derive_addresses(wallet.sealed, PASSWORD, ALL)


async def test_a_user_wallet_never_opens_without_its_password(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    with pytest.raises(SealedRecordError):
        await keystore.derive_addresses(wallet.sealed, None, ALL)


@pytest.mark.parametrize("chains", [[], ALL])
async def test_a_wrong_password_is_refused(keystore: SealedKeyStore, chains: list[Chain]) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    with pytest.raises(WrongWalletPassword):
        await keystore.derive_addresses(wallet.sealed, PASSWORD + "!", chains)
    with pytest.raises(WrongWalletPassword):
        async with keystore.unseal(wallet.sealed, "not the password", Chain.SOLANA):
            pytest.fail("unsealed with a wrong password")  # pragma: no cover


# -- unsealing and signing ------------------------------------------------------------------
def _recover(chain: Chain, digest: bytes, signature: bytes) -> str:
    """The address that made `signature`, by public key recovery (no keystore code)."""
    assert len(signature) == 65
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")
    assert s <= 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141 // 2  # low-S
    public = EthSignature(vrs=(signature[64], r, s)).recover_public_key_from_msg_hash(digest)
    if chain == Chain.BITCOIN:
        compressed = public.to_compressed_bytes()
        program = hashlib.new("ripemd160", hashlib.sha256(compressed).digest()).digest()
        return str(bclib.encoding().pubkeyhash_to_addr_bech32(program, prefix="bc", witver=0))
    if chain == Chain.TRON:
        return base58.b58encode_check(b"\x41" + keccak(public.to_bytes())[-20:]).decode()
    return str(public.to_checksum_address())


@pytest.mark.parametrize("chain", ALL)
async def test_unseal_gives_the_key_of_the_stored_address(
    keystore: SealedKeyStore, chain: Chain
) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    message = hashlib.sha256(b"a transaction").digest()
    async with keystore.unseal(wallet.sealed, PASSWORD, chain) as signer:
        assert signer.chain == chain
        assert signer.address == wallet.addresses[chain]
        signature = signer.sign(message)
        assert "hidden" in repr(signer)
    if chain == Chain.SOLANA:
        VerifyKey(base58.b58decode(wallet.addresses[chain])).verify(message, signature)
    else:
        assert _recover(chain, message, signature) == wallet.addresses[chain]


async def test_the_key_is_wiped_when_the_block_ends(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    async with keystore.unseal(wallet.sealed, PASSWORD, Chain.ETHEREUM) as signer:
        assert not signer.wiped
    assert isinstance(signer, ChainKey)
    assert signer.wiped and "wiped" in repr(signer)
    with pytest.raises(RuntimeError, match="wiped"):
        signer.sign(b"\1" * 32)


async def test_the_key_is_wiped_when_the_block_fails(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    with pytest.raises(LookupError):
        async with keystore.unseal(wallet.sealed, PASSWORD, Chain.TRON) as signer:
            raise LookupError("the block failed")
    assert signer.wiped


async def test_a_chain_key_cannot_be_copied_or_pickled(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    async with keystore.unseal(wallet.sealed, PASSWORD, Chain.SOLANA) as signer:
        with pytest.raises(TypeError):
            pickle.dumps(signer)
        with pytest.raises(TypeError):
            copy.copy(signer)


async def test_secp256k1_chains_sign_32_byte_digests_only(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    async with keystore.unseal(wallet.sealed, PASSWORD, Chain.BITCOIN) as signer:
        with pytest.raises(ValueError, match="32-byte digest"):
            signer.sign(b"not a digest")


# -- KDF cost -----------------------------------------------------------------------------
def test_lower_kdf_parameters_need_the_test_flag(master_key: bytes) -> None:
    with pytest.raises(ValueError, match="tests only"):
        SealedKeyStore(master_key, kdf=KdfParams(1, 64 * 1024))
    assert SealedKeyStore(master_key).kdf == sealing.PRODUCTION_KDF


async def test_full_parameters_round_trip_and_a_wrong_password_costs_the_same_kdf(
    master_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the production parameters (64 MiB, 3 passes): a wrong password runs the same one
    Argon2id as the right one, so it is not cheaper to try (what it costs in seconds is
    `bench/`'s to measure, not a timed assertion here)."""
    keystore = SealedKeyStore(master_key)
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    assert sealing.record_params(wallet.sealed) == sealing.PRODUCTION_KDF

    runs: list[object] = []
    real = sealing._argon2id

    def counted(password: str, salt: bytes, params: sealing.KdfParams) -> bytes:
        runs.append(params)
        return real(password, salt, params)

    monkeypatch.setattr(sealing, "_argon2id", counted)
    assert await keystore.derive_addresses(wallet.sealed, PASSWORD, ALL) == wallet.addresses
    right = list(runs)
    runs.clear()
    with pytest.raises(WrongWalletPassword):
        await keystore.derive_addresses(wallet.sealed, PASSWORD + "?", [])
    assert runs == right == [sealing.PRODUCTION_KDF]


async def test_a_record_sealed_with_other_parameters_opens_under_new_defaults(
    master_key: bytes,
) -> None:
    old = SealedKeyStore(master_key, kdf=KdfParams(1, 256 * 1024), allow_weak_kdf=True)
    wallet = await old.create_wallet(PASSWORD, ALL)
    current = SealedKeyStore(master_key)
    assert await current.derive_addresses(wallet.sealed, PASSWORD, ALL) == wallet.addresses


# -- concurrency --------------------------------------------------------------------------
class _Tracker:
    """Wraps the unseal of the sealing module, recording how many run at once."""

    def __init__(self, inner: Callable[..., Any], hold: float) -> None:
        self._inner, self._hold = inner, hold
        self._lock = threading.Lock()
        self.running = self.peak = self.calls = 0

    def __call__(self, *args: Any) -> Any:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.peak = max(self.peak, self.running)
        try:
            time.sleep(self._hold)
            return self._inner(*args)
        finally:
            with self._lock:
                self.running -= 1


async def test_concurrent_unseals_are_capped(
    master_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = KdfParams(1, 64 * 1024)
    keystore = SealedKeyStore(master_key, max_concurrent_unseals=2, kdf=fast, allow_weak_kdf=True)
    wallet = await keystore.create_wallet(PASSWORD, [Chain.ETHEREUM])
    tracker = _Tracker(sealing.open_with_password, hold=0.05)
    monkeypatch.setattr(sealing, "open_with_password", tracker)
    await asyncio.gather(
        *(keystore.derive_addresses(wallet.sealed, PASSWORD, [Chain.ETHEREUM]) for _ in range(7))
    )
    assert tracker.calls == 7
    assert tracker.peak == 2


async def test_a_cancelled_caller_keeps_its_slot_until_the_work_ends(
    master_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = KdfParams(1, 64 * 1024)
    keystore = SealedKeyStore(master_key, max_concurrent_unseals=1, kdf=fast, allow_weak_kdf=True)
    wallet = await keystore.create_wallet(PASSWORD, [Chain.ETHEREUM])
    tracker = _Tracker(sealing.open_with_password, hold=0.2)
    monkeypatch.setattr(sealing, "open_with_password", tracker)
    first = asyncio.create_task(keystore.derive_addresses(wallet.sealed, PASSWORD, []))
    await asyncio.sleep(0.05)
    first.cancel()
    second = asyncio.create_task(keystore.derive_addresses(wallet.sealed, PASSWORD, []))
    await second
    with pytest.raises(asyncio.CancelledError):
        await first
    assert tracker.calls == 2 and tracker.peak == 1


# -- the entry point and bitcoinlib's data directory ----------------------------------------
def test_the_entry_point_builds_a_production_keystore(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, max_concurrent_unseals=3)
    keystore = plugins.build(
        "walletcore.keystores",
        "sealed",
        settings=settings,
        clock=SystemClock(),
        master_key=b"\1" * 32,
    )
    assert isinstance(keystore, SealedKeyStore)
    assert keystore.kdf == sealing.PRODUCTION_KDF
    assert keystore._slots._value == 3


def test_bitcoinlib_data_directory_is_never_the_users_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import bitcoinlib.config.config as bcl_config  # type: ignore[import-untyped]

    bclib.keys()
    assert Path(bcl_config.BCL_DATA_DIR) == Path(os.environ["BCL_DATA_DIR"])
    assert Path(bcl_config.BCL_DATA_DIR) != Path.home() / ".bitcoinlib"

    monkeypatch.delenv("BCL_DATA_DIR")
    assert bclib.configure(tmp_path / "home") == (tmp_path / "home" / "bitcoinlib").resolve()
    assert os.environ["BCL_DATA_DIR"] == str((tmp_path / "home" / "bitcoinlib").resolve())
    monkeypatch.setenv("BCL_DATA_DIR", str(tmp_path / "chosen"))
    assert bclib.configure(tmp_path / "home") == tmp_path / "chosen"  # a choice is kept


# -- signature checks -----------------------------------------------------------------------
@pytest.mark.parametrize("chain", ALL)
async def test_verify_signature_accepts_only_the_signers_address(
    keystore: SealedKeyStore, chain: Chain
) -> None:
    mine = await keystore.create_wallet(PASSWORD, ALL)
    other = await keystore.create_wallet(PASSWORD, ALL)
    digest = hashlib.sha256(b"pay 1 coin").digest()
    async with keystore.unseal(mine.sealed, PASSWORD, chain) as signer:
        signature = signer.sign(digest)
    assert verify_signature(chain, mine.addresses[chain], digest, signature)
    assert not verify_signature(chain, other.addresses[chain], digest, signature)
    assert not verify_signature(chain, mine.addresses[chain], digest[::-1], signature)
    tampered = bytearray(signature)
    tampered[5] ^= 1
    assert not verify_signature(chain, mine.addresses[chain], digest, bytes(tampered))
    assert not verify_signature(chain, mine.addresses[chain], digest, signature[:-1])


async def test_verify_signature_refuses_high_s(keystore: SealedKeyStore) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    digest = hashlib.sha256(b"malleable").digest()
    async with keystore.unseal(wallet.sealed, PASSWORD, Chain.ETHEREUM) as signer:
        signature = signer.sign(digest)
    s = int.from_bytes(signature[32:64], "big")
    flipped = signature[:32] + (SECP256K1_N - s).to_bytes(32, "big") + bytes([signature[64] ^ 1])
    assert not verify_signature(Chain.ETHEREUM, wallet.addresses[Chain.ETHEREUM], digest, flipped)


async def test_a_signature_that_fails_its_check_is_never_returned(
    keystore: SealedKeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    monkeypatch.setattr(ChainKey, "_sign", lambda self, payload: b"\1" * 65)
    async with keystore.unseal(wallet.sealed, PASSWORD, Chain.TRON) as signer:
        with pytest.raises(RuntimeError, match="failed its own check"):
            signer.sign(b"\2" * 32)


async def test_a_library_failure_leaves_without_its_message(
    keystore: SealedKeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    wallet = await keystore.create_wallet(PASSWORD, ALL)
    seed_hex = "ab" * 64

    def leaky(seed: bytes, chains: Any) -> None:
        raise ValueError(f"bad entropy {seed_hex}")

    monkeypatch.setattr(hd, "derive_addresses", leaky)
    with pytest.raises(KeyMaterialError) as caught:
        await keystore.derive_addresses(wallet.sealed, PASSWORD, ALL)
    assert seed_hex not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_creation_fails_if_the_new_record_does_not_open(
    keystore: SealedKeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_seal = sealing._seal

    def faulty(seed: Any, secret: bytes, header: bytes) -> bytes:
        record = bytearray(real_seal(seed, secret, header))
        record[-1] ^= 1  # a fault between sealing and storing
        return bytes(record)

    monkeypatch.setattr(sealing, "_seal", faulty)
    with pytest.raises(SealedRecordError, match="did not open"):
        await keystore.create_wallet(PASSWORD, ALL)


async def test_creation_runs_argon2id_once_and_the_record_opens(
    keystore: SealedKeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that the new record opens reuses the one key derivation (one Argon2id a
    /create)."""
    real = sealing._argon2id
    runs: list[KdfParams] = []

    def counted(password: str, salt: bytes, params: KdfParams) -> bytes:
        runs.append(params)
        return real(password, salt, params)

    monkeypatch.setattr(sealing, "_argon2id", counted)
    created = await keystore.create_wallet(PASSWORD, ALL)
    assert len(runs) == 1
    monkeypatch.setattr(sealing, "_argon2id", real)
    assert await keystore.derive_addresses(created.sealed, PASSWORD, ALL) == created.addresses


def test_the_keystore_seals_the_services_secrets_under_the_master_key() -> None:
    """`SecretSealer`: webhook secrets at rest, sealed under the master key; a record a
    deployment kept unsealed (first byte 0) still opens."""
    from walletcore.ports import SecretSealer
    from walletcore_chains.keystore import SealedKeyStore

    master = bytes(range(32))
    store = SealedKeyStore(master)
    assert isinstance(store, SecretSealer)
    sealed = store.seal_secret(b"k" * 32)
    assert b"k" * 32 not in sealed
    assert store.open_secret(sealed) == b"k" * 32
    assert SealedKeyStore(master).open_secret(sealed) == b"k" * 32  # another process
    assert store.open_secret(b"\x00" + b"p" * 32) == b"p" * 32
