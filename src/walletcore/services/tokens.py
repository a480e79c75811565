"""Access tokens: JWTs signed with EdDSA (Ed25519), carrying client and key generation.

PyJWT does the compact JWS (base64url, JSON, the signature check through `cryptography`);
this module only says which algorithm is acceptable (EdDSA, nothing else), which claims a
token must carry and of which types. Expiry is checked by the caller against its injected
clock, so PyJWT's own time checks (which read the wall clock) are off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from walletcore.domain.ids import new_id

if TYPE_CHECKING:
    from jwt.types import Options

#: Longer than any token we issue; anything bigger is not looked at.
MAX_TOKEN_CHARS = 1024
_ALGORITHM = "EdDSA"
_ALGORITHMS = [_ALGORITHM]  # never taken from the token's header
_REQUIRED_CLAIMS = ["sub", "gen", "iat", "exp", "jti"]
_DECODE_OPTIONS: Options = {
    "verify_signature": True,
    "verify_exp": False,  # the caller compares `exp` with its own clock
    "verify_iat": False,
    "verify_nbf": False,
    "require": _REQUIRED_CLAIMS,
}


@dataclass(frozen=True, slots=True)
class TokenClaims:
    client_id: str
    generation: int
    issued_at: datetime
    expires_at: datetime


class TokenSigner:
    """Signs and verifies tokens with one Ed25519 key. Holds the key; shows nothing of it."""

    __slots__ = ("_private", "_public")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("the token signing key must be 32 bytes")
        self._private = Ed25519PrivateKey.from_private_bytes(bytes(seed))
        self._public = self._private.public_key()

    def __repr__(self) -> str:
        return "TokenSigner(<ed25519 key hidden>)"

    def sign(self, claims: TokenClaims) -> str:
        payload = {
            "sub": claims.client_id,
            "gen": claims.generation,
            "iat": int(claims.issued_at.timestamp()),
            "exp": int(claims.expires_at.timestamp()),
            "jti": new_id(),
        }
        return jwt.encode(payload, self._private, algorithm=_ALGORITHM)

    def verify(self, token: str) -> TokenClaims | None:
        """The claims of a well-formed token with a valid signature, else None.

        Expiry is the caller's to check against its clock.
        """
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
            return None
        try:
            payload: dict[str, Any] = jwt.decode(
                token, self._public, algorithms=_ALGORITHMS, options=_DECODE_OPTIONS
            )
        except jwt.PyJWTError:
            return None
        return _claims(payload)


def _claims(payload: dict[str, Any]) -> TokenClaims | None:
    """The claims of a verified payload whose claims are all there (PyJWT's `require`)."""
    subject, token_id = payload["sub"], payload["jti"]
    generation, issued, expires = payload["gen"], payload["iat"], payload["exp"]
    # Types are checked here (PyJWT checks `sub` and `jti` only from 2.10); a bool is no int.
    if not (isinstance(subject, str) and isinstance(token_id, str)):
        return None
    if not all(type(value) is int for value in (generation, issued, expires)):
        return None
    try:
        return TokenClaims(
            client_id=subject,
            generation=generation,
            issued_at=datetime.fromtimestamp(issued, UTC),
            expires_at=datetime.fromtimestamp(expires, UTC),
        )
    except (OverflowError, OSError, ValueError):  # beyond the platform's or C library's range
        return None
