"""A token signer that remembers tokens it has verified: the hot path of every request.

`TokenSigner.verify` is a pure function of the key and the token string (PyJWT's parse and
an Ed25519 signature check, ~90 us). Its result for a token that verified is kept in a
bounded map, so a client reusing its token (as the spec recommends: cache it until
`expiresAt`) pays the signature check once. Only successes are kept, keyed by the whole
token string, so a forged or altered token never hits; expiry, the client's status and its
key generation are still checked by `AuthService.verify` on every request.
"""

from __future__ import annotations

from walletcore.services.tokens import TokenClaims, TokenSigner

DEFAULT_CAPACITY = 4096


class CachingTokenSigner(TokenSigner):
    # A plain insertion-ordered dict, not functools.lru_cache (it would cache failures too,
    # letting forged tokens evict good ones) nor cachetools (not a dependency, for 5 lines).
    __slots__ = ("_capacity", "_verified")

    def __init__(self, seed: bytes, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(seed)
        self._capacity = capacity
        self._verified: dict[str, TokenClaims] = {}

    def __repr__(self) -> str:
        return "CachingTokenSigner(<ed25519 key hidden>)"

    def verify(self, token: str) -> TokenClaims | None:
        claims = self._verified.get(token) if isinstance(token, str) else None
        if claims is not None:
            return claims
        claims = super().verify(token)
        if claims is not None:
            if len(self._verified) >= self._capacity:
                # Drop the oldest entry (dicts keep insertion order).
                self._verified.pop(next(iter(self._verified)))
            self._verified[token] = claims
        return claims
