"""Access tokens: signed by the service's Ed25519 key, refused when altered in any way."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from nacl.signing import SigningKey

from walletcore.services.tokens import MAX_TOKEN_CHARS, TokenClaims, TokenSigner

SEED = hashlib.sha256(b"test signing key").digest()
ISSUED = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
CLAIMS = TokenClaims("ab" * 12, 3, ISSUED, ISSUED + timedelta(minutes=15))


def b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signed(header: dict[str, object], payload: object, seed: bytes = SEED) -> str:
    h = b64e(json.dumps(header).encode())
    b = b64e(json.dumps(payload).encode())
    signature = SigningKey(seed).sign(f"{h}.{b}".encode()).signature
    return f"{h}.{b}.{b64e(signature)}"


@pytest.fixture
def signer() -> TokenSigner:
    return TokenSigner(SEED)


def test_a_token_verifies_to_its_claims(signer: TokenSigner) -> None:
    token = signer.sign(CLAIMS)
    assert signer.verify(token) == CLAIMS
    header = json.loads(b64d(token.split(".")[0]))
    assert header["alg"] == "EdDSA"


def test_each_token_is_unique(signer: TokenSigner) -> None:
    assert signer.sign(CLAIMS) != signer.sign(CLAIMS)


def test_expiry_is_left_to_the_caller(signer: TokenSigner) -> None:
    """The signer checks integrity only; the auth service compares expiry with its clock."""
    old = TokenClaims(CLAIMS.client_id, 1, ISSUED - timedelta(days=2), ISSUED - timedelta(days=1))
    assert signer.verify(signer.sign(old)) == old


def test_a_tampered_signature_is_refused(signer: TokenSigner) -> None:
    header, body, signature = signer.sign(CLAIMS).split(".")
    raw = bytearray(b64d(signature))
    for index in (0, 31, 63):
        forged = bytearray(raw)
        forged[index] ^= 0x80
        assert signer.verify(f"{header}.{body}.{b64e(bytes(forged))}") is None


def test_a_tampered_payload_is_refused(signer: TokenSigner) -> None:
    header, body, signature = signer.sign(CLAIMS).split(".")
    payload = json.loads(b64d(body))
    for key, value in (("exp", payload["exp"] + 3600), ("gen", 4), ("sub", "cd" * 12)):
        changed = b64e(json.dumps({**payload, key: value}, separators=(",", ":")).encode())
        assert signer.verify(f"{header}.{changed}.{signature}") is None


def test_a_token_of_another_key_is_refused(signer: TokenSigner) -> None:
    other = TokenSigner(hashlib.sha256(b"someone else").digest())
    assert signer.verify(other.sign(CLAIMS)) is None
    assert other.verify(signer.sign(CLAIMS)) is None


@pytest.mark.parametrize("alg", ["none", "HS256", "RS256", "ES256", "eddsa", None])
def test_a_header_naming_another_algorithm_is_refused_even_when_correctly_signed(
    signer: TokenSigner, alg: str | None
) -> None:
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    assert signer.verify(signed({"alg": alg, "typ": "JWT"}, body)) is None
    assert signer.verify(signed({"alg": "EdDSA", "typ": "JWT"}, body)) == CLAIMS  # control


def test_alg_none_with_an_empty_signature_is_refused(signer: TokenSigner) -> None:
    _, body, _ = signer.sign(CLAIMS).split(".")
    header = b64e(json.dumps({"alg": "none"}).encode())
    assert signer.verify(f"{header}.{body}.") is None


@pytest.mark.parametrize(
    "payload",
    [
        {"sub": "ab" * 12, "gen": 1, "iat": 0},  # no exp
        {"sub": "ab" * 12, "gen": "x", "iat": 0, "exp": 1},
        {"sub": "ab" * 12, "gen": 1, "iat": 0, "exp": "soon"},
        {"sub": "ab" * 12, "gen": 1, "iat": 0, "exp": 10**30},
        {"sub": "ab" * 12, "gen": 1, "iat": 0, "exp": 10**18},  # OSError in the C library
        {"sub": "ab" * 12, "gen": 1, "iat": -(10**18), "exp": 1},
        {"sub": "ab" * 12, "gen": 1, "iat": 0, "exp": -(10**15)},
        [1, 2, 3],
        "a string",
        None,
    ],
    ids=repr,
)
def test_a_well_signed_token_with_malformed_claims_is_refused(
    signer: TokenSigner, payload: object
) -> None:
    assert signer.verify(signed({"alg": "EdDSA"}, payload)) is None


@pytest.mark.parametrize("header", [[], "EdDSA", None, 1], ids=repr)
def test_a_well_signed_token_with_a_malformed_header_is_refused(
    signer: TokenSigner, header: object
) -> None:
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    assert signer.verify(signed(header, body)) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "token",
    ["", ".", "..", "a.b.c", "a.b", "a.b.c.d", "é.é.é", "x" * 5000, "a.b.!!!", 42, None],
    ids=lambda t: repr(t)[:20],
)
def test_garbage_is_refused_quietly(signer: TokenSigner, token: object) -> None:
    assert signer.verify(token) is None  # type: ignore[arg-type]


def test_the_key_never_shows(signer: TokenSigner) -> None:
    assert SEED.hex() not in repr(signer) and "key hidden" in repr(signer)
    with pytest.raises(ValueError):
        TokenSigner(b"short")


def test_hmac_with_the_public_key_as_secret_is_refused(signer: TokenSigner) -> None:
    """The classic key-confusion forgery: HS256 keyed with the (public) verify key."""
    _, body, _ = signer.sign(CLAIMS).split(".")
    header = b64e(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    public = bytes(SigningKey(SEED).verify_key)
    mac = hmac.new(public, f"{header}.{body}".encode(), hashlib.sha256).digest()
    assert signer.verify(f"{header}.{body}.{b64e(mac)}") is None


@pytest.mark.parametrize(
    "change",
    [
        {"gen": True},  # a bool is not an integer here
        {"gen": 3.0},
        {"iat": 1.5},
        {"sub": 42},
        {"sub": None},
        {"jti": None},
        {"jti": 7},
    ],
    ids=repr,
)
def test_claims_of_the_wrong_type_are_refused(
    signer: TokenSigner, change: dict[str, object]
) -> None:
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    assert signer.verify(signed({"alg": "EdDSA"}, {**body, **change})) is None


@pytest.mark.parametrize("claim", ["sub", "gen", "iat", "exp", "jti"])
def test_every_claim_is_required(signer: TokenSigner, claim: str) -> None:
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    del body[claim]
    assert signer.verify(signed({"alg": "EdDSA"}, body)) is None


def test_an_unencoded_payload_header_is_refused(signer: TokenSigner) -> None:
    """RFC 7797 `b64: false` (a detached payload) is not a form we issue or accept."""
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    header = {"alg": "EdDSA", "b64": False, "crit": ["b64"]}
    assert signer.verify(signed(header, body)) is None


def test_oversized_tokens_are_not_looked_at(signer: TokenSigner) -> None:
    body = json.loads(b64d(signer.sign(CLAIMS).split(".")[1]))
    padded = signed({"alg": "EdDSA", "pad": "x" * MAX_TOKEN_CHARS}, body)
    assert len(padded) > MAX_TOKEN_CHARS
    assert signer.verify(padded) is None


def test_tokens_are_standard_jwts(signer: TokenSigner) -> None:
    """Any JWT library verifies ours with the public key, and ours verifies its tokens."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(SEED)
    decoded = jwt.decode(
        signer.sign(CLAIMS), key.public_key(), algorithms=["EdDSA"], options={"verify_exp": False}
    )
    assert decoded["sub"] == CLAIMS.client_id and decoded["gen"] == CLAIMS.generation
    assert isinstance(decoded["jti"], str) and len(decoded["jti"]) == 24
    payload = {
        "sub": CLAIMS.client_id,
        "gen": CLAIMS.generation,
        "iat": int(CLAIMS.issued_at.timestamp()),
        "exp": int(CLAIMS.expires_at.timestamp()),
        "jti": "cd" * 12,
    }
    assert signer.verify(jwt.encode(payload, key, algorithm="EdDSA")) == CLAIMS
