"""Access tokens: compact JWS (EdDSA / Ed25519 via pynacl) carrying client and key generation."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey

from walletcore.domain.ids import new_id

_HEADER = {"alg": "EdDSA", "typ": "JWT"}
#: Longer than any token we issue; anything bigger is not looked at.
MAX_TOKEN_CHARS = 1024


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_HEADER_B64 = _b64e(json.dumps(_HEADER, separators=(",", ":")).encode())


@dataclass(frozen=True, slots=True)
class TokenClaims:
    client_id: str
    generation: int
    issued_at: datetime
    expires_at: datetime


class TokenSigner:
    """Signs and verifies tokens with one Ed25519 key. Holds the key; shows nothing of it."""

    __slots__ = ("_signing", "_verify")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("the token signing key must be 32 bytes")
        self._signing = SigningKey(seed)
        self._verify = self._signing.verify_key

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
        body = _b64e(json.dumps(payload, separators=(",", ":")).encode())
        signing_input = f"{_HEADER_B64}.{body}".encode("ascii")
        signature = self._signing.sign(signing_input).signature
        return f"{_HEADER_B64}.{body}.{_b64e(signature)}"

    def verify(self, token: str) -> TokenClaims | None:
        """The claims of a well-formed token with a valid signature, else None.

        Expiry is the caller's to check against its clock.
        """
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
            return None
        header, body, signature = token.split(".")
        try:
            self._verify.verify(f"{header}.{body}".encode("ascii"), _b64d(signature))
            payload: Any = json.loads(_b64d(body))
            parsed_header: Any = json.loads(_b64d(header))
            if not isinstance(parsed_header, dict) or parsed_header.get("alg") != "EdDSA":
                return None
            return TokenClaims(
                client_id=str(payload["sub"]),
                generation=int(payload["gen"]),
                issued_at=datetime.fromtimestamp(int(payload["iat"]), UTC),
                expires_at=datetime.fromtimestamp(int(payload["exp"]), UTC),
            )
        except (
            BadSignatureError,
            ValueError,
            KeyError,
            TypeError,
            UnicodeError,
            binascii.Error,
            OverflowError,  # a timestamp beyond the platform's range
            OSError,  # ... or beyond the C library's (`exp=10**18`)
        ):
            return None
