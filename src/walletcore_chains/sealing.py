"""The sealed record: a wallet's 64-byte BIP39 seed in a NaCl SecretBox, with its KDF header.

Layout, version 1 (big-endian):

    offset  size  field
    0       1     version        1
    1       1     scheme         1 = wallet password (Argon2id), 2 = operator master key
    2       4     opslimit       Argon2id passes (0 for scheme 2)
    6       4     memlimit       Argon2id memory in KiB (0 for scheme 2)
    10      16    salt           random per record
    26      24    nonce          XSalsa20 nonce (random)
    50      80    box            Poly1305 tag (16) + encrypted seed (64)

Scheme 3 seals a short secret of the service's own (a webhook signing secret) under the
master key: the same header (opslimit and memlimit 0), then the nonce and a box of any
length from 1 to 1024 bytes (`seal_secret`, `open_secret`).

The box key is BLAKE2b-256 keyed by the secret (the Argon2id output, or the master key) over
the 26-byte header, so every header bit is authenticated: a record whose parameters were
altered does not open. Opening uses the parameters stored in the record, so raising the
defaults later leaves older records readable.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
import unicodedata
from dataclasses import dataclass

from walletcore.domain.errors import WrongWalletPassword

VERSION = 1
SCHEME_PASSWORD = 1
SCHEME_OPERATOR = 2
SCHEME_SECRET = 3
#: The longest secret `seal_secret` takes.
MAX_SECRET_BYTES = 1024
SEED_BYTES = 64
MASTER_KEY_BYTES = 32

_HEADER = struct.Struct(">BBII16s")
_PERSON = b"walletcore.seal"
_NONCE_BYTES = 24
_TAG_BYTES = 16
RECORD_BYTES = _HEADER.size + _NONCE_BYTES + _TAG_BYTES + SEED_BYTES

#: Bounds a stored record's parameters must lie within (a damaged record must not ask for
#: terabytes of memory).
_MAX_OPSLIMIT = 64
_MAX_MEMLIMIT = 4 * 1024**3


class SealedRecordError(RuntimeError):
    """The record is damaged, of an unknown version, or sealed under another scheme or key.

    Not a password problem: an internal error. The message carries no secret.
    """


@dataclass(frozen=True, slots=True)
class KdfParams:
    """Argon2id cost. libsodium runs one lane, so parallelism is always 1."""

    opslimit: int
    memlimit: int  # bytes, a multiple of 1 KiB

    def __post_init__(self) -> None:
        from nacl.pwhash import argon2id

        if not argon2id.OPSLIMIT_MIN <= self.opslimit <= _MAX_OPSLIMIT:
            raise ValueError("Argon2id opslimit out of range")
        if not argon2id.MEMLIMIT_MIN <= self.memlimit <= _MAX_MEMLIMIT or self.memlimit % 1024:
            raise ValueError("Argon2id memlimit out of range")

    def at_least(self, other: KdfParams) -> bool:
        return self.opslimit >= other.opslimit and self.memlimit >= other.memlimit


#: RFC 9106's second recommended option: 64 MiB, 3 passes (libsodium: 1 lane).
PRODUCTION_KDF = KdfParams(opslimit=3, memlimit=64 * 1024 * 1024)


# -- sealing ------------------------------------------------------------------------------
def seal_with_password(seed: bytes | bytearray, password: str, params: KdfParams) -> bytes:
    salt = secrets.token_bytes(16)
    header = _HEADER.pack(VERSION, SCHEME_PASSWORD, params.opslimit, params.memlimit // 1024, salt)
    return _seal(seed, _argon2id(password, salt, params), header)


def seal_with_password_checked(seed: bytes | bytearray, password: str, params: KdfParams) -> bytes:
    """`seal_with_password`, then the record opened again and compared with `seed`, with
    one Argon2id run, not two: the record is parsed back as `open_with_password` would,
    its salt and parameters must be the ones the key was derived from (so that function,
    deterministic, would derive the same key), and the box must open to the seed.
    `SealedRecordError` otherwise: nothing may be shown of a wallet that would not open.
    """
    salt = secrets.token_bytes(16)
    header = _HEADER.pack(VERSION, SCHEME_PASSWORD, params.opslimit, params.memlimit // 1024, salt)
    secret = _argon2id(password, salt, params)
    record = _seal(seed, secret, header)
    parsed_header, scheme, parsed_params, parsed_salt = _parse(record)
    if (scheme, parsed_params, parsed_salt, parsed_header) != (
        SCHEME_PASSWORD,
        params,
        salt,
        header,
    ):
        raise SealedRecordError("the new sealed record does not read back as it was sealed")
    reopened = _open(record, secret, parsed_header)
    if reopened is None:
        raise SealedRecordError("the new sealed record did not open")
    try:
        if not hmac.compare_digest(bytes(reopened), bytes(seed)):
            raise SealedRecordError("the sealed record did not open to its seed")
    finally:
        for i in range(len(reopened)):
            reopened[i] = 0
    return record


def seal_with_master_key(seed: bytes | bytearray, master_key: bytes) -> bytes:
    _check_master_key(master_key)
    header = _HEADER.pack(VERSION, SCHEME_OPERATOR, 0, 0, secrets.token_bytes(16))
    return _seal(seed, master_key, header)


def _seal(seed: bytes | bytearray, secret: bytes, header: bytes) -> bytes:
    from nacl.secret import SecretBox

    if len(seed) != SEED_BYTES:
        raise ValueError("a sealed seed is 64 bytes")
    box = SecretBox(_box_key(secret, header))
    return header + bytes(box.encrypt(bytes(seed)))


# -- opening ------------------------------------------------------------------------------
def scheme_of(record: bytes) -> int:
    return _parse(record)[1]


def open_with_password(record: bytes, password: str) -> bytearray:
    """The seed. A wrong password raises `WrongWalletPassword` after the full KDF time."""
    header, scheme, params, salt = _parse(record)
    if scheme != SCHEME_PASSWORD or params is None:
        raise SealedRecordError("the record is not sealed under a wallet password")
    seed = _open(record, _argon2id(password, salt, params), header)
    if seed is None:
        raise WrongWalletPassword()
    return seed


def open_with_master_key(record: bytes, master_key: bytes) -> bytearray:
    _check_master_key(master_key)
    header, scheme, _params, _salt = _parse(record)
    if scheme != SCHEME_OPERATOR:
        raise SealedRecordError("the record is not sealed under the operator master key")
    seed = _open(record, master_key, header)
    if seed is None:
        raise SealedRecordError("the platform wallet does not open under the configured master key")
    return seed


# -- short secrets under the master key (scheme 3) ------------------------------------------
def seal_secret(secret: bytes, master_key: bytes) -> bytes:
    """`secret` (1 to 1024 bytes) sealed under the master key."""
    from nacl.secret import SecretBox

    _check_master_key(master_key)
    if not isinstance(secret, (bytes, bytearray)) or not 0 < len(secret) <= MAX_SECRET_BYTES:
        raise ValueError(f"a sealed secret is 1 to {MAX_SECRET_BYTES} bytes")
    header = _HEADER.pack(VERSION, SCHEME_SECRET, 0, 0, secrets.token_bytes(16))
    return header + bytes(SecretBox(_box_key(master_key, header)).encrypt(bytes(secret)))


def open_secret(record: bytes, master_key: bytes) -> bytes:
    """The secret `seal_secret` sealed; `SealedRecordError` for a damaged record or one
    sealed under another key (its message carries nothing of the record)."""
    from nacl.exceptions import CryptoError
    from nacl.secret import SecretBox

    _check_master_key(master_key)
    least = _HEADER.size + _NONCE_BYTES + _TAG_BYTES + 1
    if not isinstance(record, (bytes, bytearray)) or len(record) < least:
        raise SealedRecordError("the sealed secret is damaged (too short)")
    header = bytes(record[: _HEADER.size])
    version, scheme, opslimit, mem_kib, _salt = _HEADER.unpack(header)
    if version != VERSION or scheme != SCHEME_SECRET or opslimit or mem_kib:
        raise SealedRecordError("the record is not a secret sealed under the master key")
    try:
        box = SecretBox(_box_key(master_key, header))
        return bytes(box.decrypt(bytes(record[_HEADER.size :])))
    except CryptoError:
        raise SealedRecordError(
            "the sealed secret does not open under the configured master key"
        ) from None


def record_params(record: bytes) -> KdfParams | None:
    """The Argon2id parameters a record was sealed with (None for the operator scheme)."""
    return _parse(record)[2]


def _parse(record: bytes) -> tuple[bytes, int, KdfParams | None, bytes]:
    if not isinstance(record, (bytes, bytearray)) or not record:
        raise SealedRecordError("the sealed record is empty")
    if record[0] != VERSION:
        raise SealedRecordError(f"unknown sealed record version {record[0]}")
    if len(record) != RECORD_BYTES:
        raise SealedRecordError("the sealed record is damaged (wrong length)")
    header = bytes(record[: _HEADER.size])
    _version, scheme, opslimit, mem_kib, salt = _HEADER.unpack(header)
    if scheme == SCHEME_PASSWORD:
        try:
            return header, scheme, KdfParams(opslimit, mem_kib * 1024), salt
        except ValueError:
            raise SealedRecordError("the sealed record has out-of-range KDF parameters") from None
    if scheme == SCHEME_OPERATOR and opslimit == 0 and mem_kib == 0:
        return header, scheme, None, salt
    raise SealedRecordError("the sealed record has an unknown scheme")


def _open(record: bytes, secret: bytes, header: bytes) -> bytearray | None:
    from nacl.exceptions import CryptoError
    from nacl.secret import SecretBox

    try:
        plain = SecretBox(_box_key(secret, header)).decrypt(bytes(record[_HEADER.size :]))
    except CryptoError:
        return None
    if len(plain) != SEED_BYTES:  # pragma: no cover - authenticated, so only a sealing bug
        raise SealedRecordError("the sealed record holds no seed")
    return bytearray(plain)


# -- keys ---------------------------------------------------------------------------------
def encode_password(password: str) -> bytes:
    """NFC, then UTF-8: the same visible password opens the wallet from any keyboard."""
    return unicodedata.normalize("NFC", password).encode("utf-8")


def _argon2id(password: str, salt: bytes, params: KdfParams) -> bytes:
    from nacl.pwhash import argon2id

    key: bytes = argon2id.kdf(
        32,
        encode_password(password),
        salt,
        opslimit=params.opslimit,
        memlimit=params.memlimit,
    )
    return key


def _box_key(secret: bytes, header: bytes) -> bytes:
    return hashlib.blake2b(header, key=secret, digest_size=32, person=_PERSON).digest()


def _check_master_key(master_key: bytes) -> None:
    if not isinstance(master_key, bytes) or len(master_key) != MASTER_KEY_BYTES:
        raise ValueError("the operator master key is 32 bytes")
