"""The sealed record: round trips, the stored parameters, wrong passwords, damage."""

from __future__ import annotations

import secrets
import struct

import pytest

from walletcore.domain.errors import InvalidCredentials, WrongWalletPassword
from walletcore_chains import sealing
from walletcore_chains.sealing import KdfParams, SealedRecordError

FAST = KdfParams(opslimit=1, memlimit=64 * 1024)
PASSWORD = "correct horse battery staple"


@pytest.fixture
def seed() -> bytes:
    return secrets.token_bytes(64)


def test_production_parameters_meet_rfc9106_second_choice() -> None:
    assert sealing.PRODUCTION_KDF.opslimit >= 3
    assert sealing.PRODUCTION_KDF.memlimit >= 64 * 1024 * 1024


def test_password_round_trip(seed: bytes) -> None:
    record = sealing.seal_with_password(seed, PASSWORD, FAST)
    assert bytes(sealing.open_with_password(record, PASSWORD)) == seed


def test_the_record_layout(seed: bytes) -> None:
    record = sealing.seal_with_password(seed, PASSWORD, KdfParams(2, 128 * 1024))
    assert len(record) == sealing.RECORD_BYTES == 130
    version, scheme, opslimit, mem_kib = struct.unpack(">BBII", record[:10])
    assert (version, scheme, opslimit, mem_kib) == (1, sealing.SCHEME_PASSWORD, 2, 128)
    assert sealing.record_params(record) == KdfParams(2, 128 * 1024)
    assert seed not in record


def test_every_seal_is_different(seed: bytes) -> None:
    first = sealing.seal_with_password(seed, PASSWORD, FAST)
    second = sealing.seal_with_password(seed, PASSWORD, FAST)
    assert first[10:26] != second[10:26]  # salt
    assert first != second


def test_a_wrong_password_never_opens(seed: bytes) -> None:
    record = sealing.seal_with_password(seed, PASSWORD, FAST)
    for wrong in ("", PASSWORD.upper(), PASSWORD + " ", PASSWORD[:-1], "x" * 300):
        with pytest.raises(WrongWalletPassword) as caught:
            sealing.open_with_password(record, wrong)
        assert isinstance(caught.value, InvalidCredentials)
        assert caught.value.message == "Invalid credentials"


def test_records_sealed_with_other_parameters_still_open(seed: bytes) -> None:
    """The parameters come from the record, so raising the defaults later breaks nothing."""
    for params in (KdfParams(1, 8 * 1024), KdfParams(2, 1024 * 1024), KdfParams(4, 256 * 1024)):
        record = sealing.seal_with_password(seed, PASSWORD, params)
        assert bytes(sealing.open_with_password(record, PASSWORD)) == seed


def test_a_record_from_a_fixed_earlier_seal_still_opens() -> None:
    """A record made by an earlier release (pinned bytes), sealed with opslimit 2 / 1 MiB."""
    seed = bytes(range(64))
    record = bytes.fromhex(PINNED_RECORD)
    assert sealing.record_params(record) == KdfParams(2, 1024 * 1024)
    assert bytes(sealing.open_with_password(record, "pinned password 1")) == seed


def test_altered_parameters_do_not_open(seed: bytes) -> None:
    record = bytearray(sealing.seal_with_password(seed, PASSWORD, KdfParams(2, 64 * 1024)))
    record[2:6] = (1).to_bytes(4, "big")  # a cheaper opslimit
    with pytest.raises(WrongWalletPassword):
        sealing.open_with_password(bytes(record), PASSWORD)


@pytest.mark.parametrize("offset", [10, 30, 60, 129])
def test_any_flipped_bit_does_not_open(seed: bytes, offset: int) -> None:
    record = bytearray(sealing.seal_with_password(seed, PASSWORD, FAST))
    record[offset] ^= 1
    with pytest.raises(WrongWalletPassword):
        sealing.open_with_password(bytes(record), PASSWORD)


def test_passwords_are_compared_in_nfc(seed: bytes) -> None:
    composed, decomposed = "caf\u00e9 au lait", "cafe\u0301 au lait"
    record = sealing.seal_with_password(seed, composed, FAST)
    assert bytes(sealing.open_with_password(record, decomposed)) == seed


def test_master_key_round_trip(seed: bytes) -> None:
    key = secrets.token_bytes(32)
    record = sealing.seal_with_master_key(seed, key)
    assert record[:10] == bytes([1, sealing.SCHEME_OPERATOR]) + b"\0" * 8
    assert sealing.record_params(record) is None
    assert bytes(sealing.open_with_master_key(record, key)) == seed
    with pytest.raises(SealedRecordError, match="master key"):
        sealing.open_with_master_key(record, secrets.token_bytes(32))


def test_schemes_do_not_mix(seed: bytes) -> None:
    key = secrets.token_bytes(32)
    platform = sealing.seal_with_master_key(seed, key)
    user = sealing.seal_with_password(seed, PASSWORD, FAST)
    with pytest.raises(SealedRecordError, match="not sealed under a wallet password"):
        sealing.open_with_password(platform, PASSWORD)
    with pytest.raises(SealedRecordError, match="not sealed under the operator master key"):
        sealing.open_with_master_key(user, key)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: b"", "empty"),
        (lambda r: bytes([2]) + r[1:], "unknown sealed record version 2"),
        (lambda r: r[:-1], "wrong length"),
        (lambda r: r[:1] + bytes([9]) + r[2:], "unknown scheme"),
        (lambda r: r[:2] + (1000).to_bytes(4, "big") + r[6:], "out-of-range"),
        (lambda r: r[:6] + (0xFFFFFFFF).to_bytes(4, "big") + r[10:], "out-of-range"),
    ],
)
def test_damaged_records_are_internal_errors(seed: bytes, mutate: object, message: str) -> None:
    record = sealing.seal_with_password(seed, PASSWORD, FAST)
    with pytest.raises(SealedRecordError, match=message):
        sealing.open_with_password(mutate(record), PASSWORD)  # type: ignore[operator]


def test_kdf_parameters_are_bounded() -> None:
    with pytest.raises(ValueError):
        KdfParams(0, 64 * 1024)
    with pytest.raises(ValueError):
        KdfParams(3, 1000)  # not a whole number of KiB
    assert sealing.PRODUCTION_KDF.at_least(KdfParams(3, 64 * 1024 * 1024))
    assert not FAST.at_least(sealing.PRODUCTION_KDF)


def test_the_master_key_is_32_bytes(seed: bytes) -> None:
    with pytest.raises(ValueError):
        sealing.seal_with_master_key(seed, b"short")


#: `seal_with_password(bytes(range(64)), "pinned password 1", KdfParams(2, 1 MiB))`, made once
#: and pinned here so a change of format or KDF that breaks old records fails this test.
PINNED_RECORD = (
    "01010000000200000400ed206c7ca96be0f89e9e8c6e9c3ebc3fb52440f10b99a04cf35626a7e9eea30d"
    "a98d8633f40029806a43d3237c79c6253bc685f175e71604c89d11678a877caa7f00055463b840746a4d"
    "6313920d3e18c741425542bcdff89540e42ea6c3e6eab7dee45d7b0ef4f7fe1f0c9a9b0be8b7064c8775"
    "9c421a01"
)


# -- short secrets of the service under the master key (scheme 3) --------------------------
def test_a_secret_sealed_under_the_master_key_round_trips_and_is_not_in_the_record() -> None:
    master, secret = secrets.token_bytes(32), secrets.token_bytes(32)
    record = sealing.seal_secret(secret, master)
    assert secret not in record
    version, scheme, opslimit, mem_kib = struct.unpack(">BBII", record[:10])
    assert (version, scheme, opslimit, mem_kib) == (1, sealing.SCHEME_SECRET, 0, 0)
    assert sealing.open_secret(record, master) == secret
    assert sealing.seal_secret(secret, master) != record  # a salt and nonce each time


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: r[:30], "too short"),
        (lambda r: bytes([2]) + r[1:], "not a secret sealed"),
        (lambda r: r[:1] + bytes([sealing.SCHEME_OPERATOR]) + r[2:], "not a secret sealed"),
        (lambda r: r[:20] + bytes([r[20] ^ 1]) + r[21:], "does not open"),  # the salt
        (lambda r: r[:-1] + bytes([r[-1] ^ 1]), "does not open"),  # the box
    ],
)
def test_a_damaged_sealed_secret_does_not_open(damage: object, message: str) -> None:
    master = secrets.token_bytes(32)
    record = sealing.seal_secret(b"s" * 32, master)
    with pytest.raises(SealedRecordError, match=message):
        sealing.open_secret(damage(record), master)  # type: ignore[operator]


def test_a_sealed_secret_opens_under_its_master_key_only() -> None:
    record = sealing.seal_secret(b"s" * 32, secrets.token_bytes(32))
    with pytest.raises(SealedRecordError, match="configured master key") as refused:
        sealing.open_secret(record, secrets.token_bytes(32))
    assert "s" * 8 not in str(refused.value)
    with pytest.raises(ValueError):
        sealing.seal_secret(b"", secrets.token_bytes(32))
    with pytest.raises(ValueError):
        sealing.seal_secret(b"x" * 1025, secrets.token_bytes(32))
