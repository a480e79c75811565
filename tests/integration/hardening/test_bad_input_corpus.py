"""A corpus of bad inputs sent over real HTTP to a real `walletcore serve`.

Every endpoint gets deep nesting (30,000 levels under 64 KB, 12,000 levels of objects,
1,000, 33), invalid UTF-8, lone surrogates, overlong strings and wrong types in every field,
unknown fields (a 60 KB name, an HTML name), duplicate keys, floats, NaN, huge and boolean
numbers for `assetId`, bodies that are null, arrays, scalars, empty or broken JSON, bodies
under the wrong Content-Type (text/plain, form-encoded, multipart, XML, none), invalid
tokens (exp=10**18, iat out of range, alg none, tampered, other key, 2 KB, non-ASCII),
bad `X-Request-Id` (bytes, length, repeated), `X-USER-ID` on platform endpoints and malformed
on user endpoints, ids of the wrong length or characters, malformed amounts.

Each case asserts the target behaviour: a 4xx (the spec's 400/401/404 where it names one)
with the error envelope `{message, error, requestId}`, `error == str(status)` and the
`requestId` echoed in the header; never a 5xx. After each case the server process and every
worker are still there (a worker that died, even if respawned, fails the case) and the
service answers /prices 200; after the whole corpus, the process is the one first started.

Every worker has served a /create first (`Server.prime_workers`): that imports eth_account,
whose py_ecc raises the recursion limit, so a deeply nested body overflows the C stack
instead of raising RecursionError: the trap that killed the server.

Bodies and headers are templates: `@USER@`, `@TRADE@`, `@TX@` and `@PTX@` become client A's
user, its completed trade, its user send's and its platform send's hashes when the case runs
(`@A_ID@`, `@A_KEY@`, `@B_KEY@`, `@A@`: A's credentials, B's api key, A's bearer header).

Last, raw malformed HTTP (control bytes in headers, 500 headers, broken chunking, ...), which
granian's own parser answers: recorded, and the server must survive it.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hardening_support import (
    RECIPIENT,
    WRONG_PASSWORD,
    Server,
    assert_error_envelope,
    b64url,
    claims,
    forge_token,
    iter_chunks,
    token_seed,
)

from walletcore_litestar.middleware import INVALID_REQUEST_ID

EXPIRED = "Missing or expired token"
INVALID_CREDENTIALS = "Invalid credentials"
USER_HEADER_REFUSED = "X-USER-ID is not accepted on platform endpoints"
#: How long an unknown field's name may be echoed in a message (capped, so a huge name is
#: not sent back whole).
NAME_ECHO_CAP = 64

U, T, TX, PTX = "@USER@", "@TRADE@", "@TX@", "@PTX@"

#: A valid body of every endpoint (the mutations change one thing in it). Passwords are
#: wrong on purpose: a send or extend that slips through stops at 401, never signs.
BODIES: dict[str, dict[str, Any]] = {
    "/sell": {"userId": U, "assetId": 2, "fiat": "EUR", "cryptoAmount": "0.01"},
    "/order": {"userId": U, "assetId": 2, "fiat": "EUR", "fiatAmount": "10"},
    "/trade/approve": {"userId": U, "tradeId": T},
    "/trade/cancel": {"userId": U, "tradeId": T},
    "/trade": {"userId": U, "tradeId": T},
    "/trades": {"userId": U, "side": "sell", "status": "open"},
    "/create": {"password": "a long enough password"},
    "/extend": {"userId": U, "password": WRONG_PASSWORD},
    "/addresses": {"userId": U},
    "/balance": {"userId": U, "assetId": 2},
    "/info": {"userId": U, "assetId": 2},
    "/transactions": {"userId": U, "assetId": 2},
    "/txid": {"userId": U, "assetId": 2, "txHash": TX},
    "/fee": {"userId": U, "assetId": 2, "recipient": RECIPIENT, "amount": "0.01"},
    "/send": {
        "userId": U,
        "assetId": 2,
        "recipient": RECIPIENT,
        "amount": "0.01",
        "password": WRONG_PASSWORD,
    },
    "/platform/balance": {"assetId": 2},
    "/platform/info": {"assetId": 2},
    "/platform/transactions": {"assetId": 2},
    "/platform/txid": {"assetId": 2, "txHash": PTX},
    "/platform/fee": {"assetId": 2, "recipient": RECIPIENT, "sender": RECIPIENT},
    "/platform/send": {"assetId": 2, "recipient": RECIPIENT, "amount": "0.001"},
    "/prices": {},
    "/config": {},
    "/platform/addresses": {},
}
#: What each valid body gets (the control test): the mutations' 400s are theirs.
CONTROL = {
    **{path: 200 for path in BODIES},
    "/trade/cancel": 409,  # the trade is completed
    "/extend": 401,  # wrong wallet password
    "/send": 401,
}
NO_BODY = ("/prices", "/config", "/platform/addresses")
PLATFORM = tuple(p for p in BODIES if p.startswith("/platform/"))
SENDS = ("/send", "/platform/send")
#: `sender` on /platform/fee is ignored by contract: only parse-level mutations apply.
IGNORED_FIELDS = {("/platform/fee", "sender")}


def fields_of(path: str) -> list[str]:
    """The fields mutated on `path`: its own, or an unknown `a` on the no-body endpoints."""
    return list(BODIES[path]) or ["a"]


@dataclass(frozen=True)
class Case:
    id: str
    path: str
    #: The raw body (a template), None for no body at all.
    body: bytes | None = None
    #: Sent with Transfer-Encoding: chunked (no Content-Length).
    chunked: bool = False
    #: Content-Type to send; None sends none.
    content_type: bytes | None = b"application/json"
    #: Extra headers, sent as given (bytes values, repeated names allowed).
    headers: tuple[tuple[str, bytes], ...] = ()
    #: Authorization: "A" (a valid token of client A), "none", or a TOKENS recipe.
    auth: str = "A"
    expect: frozenset[int] = frozenset({400})
    message: str | None = None
    #: Extra checks by name (CHECKS).
    checks: tuple[str, ...] = ()
    method: str = "POST"


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def render(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """A JSON object from raw (key, value) byte pairs: duplicates and raw bytes allowed."""
    return b"{" + b",".join(k + b":" + v for k, v in pairs) + b"}"


def body_with(path: str, name: str, raw: bytes | None = None, *, key: bytes | None = None) -> bytes:
    """The valid body of `path` with field `name` set to the raw JSON `raw` (added if the
    endpoint has no such field), or with its key replaced by the raw `key`."""
    pairs: list[tuple[bytes, bytes]] = []
    seen = False
    for k, v in BODIES[path].items():
        if k == name:
            seen = True
            pairs.append(
                (key if key is not None else encode(k), raw if raw is not None else encode(v))
            )
        else:
            pairs.append((encode(k), encode(v)))
    if not seen:
        pairs.append((key if key is not None else encode(name), raw if raw is not None else b"1"))
    return render(pairs)


def valid_body(path: str) -> bytes:
    return render([(encode(k), encode(v)) for k, v in BODIES[path].items()])


def arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def objects(depth: int) -> bytes:
    return b'{"":' * depth + b"0" + b"}" * depth


def mixed(depth: int) -> bytes:
    half = depth // 2
    return b'[{"":' * half + b"0" + b"}]" * half


def slug(path: str) -> str:
    return path.strip("/").replace("/", ".") or "root"


# -- the corpus ------------------------------------------------------------------------------
def nesting() -> Iterator[Case]:
    """30,000 arrays (60 KB, under the 64 KB cap), 1,000 arrays, 33 objects and 1,000 mixed
    in every field; 12,000 objects in the first field; the same as whole bodies; a chunked
    30,000-deep body (no Content-Length)."""
    for path in BODIES:
        names = fields_of(path)
        for i, name in enumerate(names):
            shapes = {
                "arrays30000": arrays(30_000),
                "arrays1000": arrays(1_000),
                "objects33": objects(33),
            }
            if i == 0:
                shapes |= {"objects12000": objects(12_000), "mixed1000": mixed(1_000)}
            for label, raw in shapes.items():
                body = body_with(path, name, raw)
                assert len(body) < 64 * 1024, (path, name, label)
                yield Case(f"nest-{slug(path)}-{name}-{label}", path, body)
        for label, raw in {
            "arrays30000": arrays(30_000),
            "objects12000": objects(12_000),
            "arrays1000": arrays(1_000),
            "objects1000": objects(1_000),
            "arrays33": arrays(33),
        }.items():
            yield Case(f"nest-{slug(path)}-body-{label}", path, raw)
    for path in ("/trades", "/balance", "/prices", "/platform/balance"):
        yield Case(
            f"nest-{slug(path)}-chunked-arrays30000",
            path,
            body_with(path, fields_of(path)[0], arrays(30_000)),
            chunked=True,
        )


def bad_utf8() -> Iterator[Case]:
    """Invalid UTF-8 in every field's value; in a key, overlong, surrogate, truncated and
    stray bytes, and a Latin-1 body on every endpoint."""
    for path in BODIES:
        for name in fields_of(path):
            yield Case(f"utf8-{slug(path)}-{name}-ff", path, body_with(path, name, b'"\xff\xfe"'))
        first = fields_of(path)[0]
        variants = {
            "key": body_with(path, first, key=b'"user\xffId"'),
            "overlong": body_with(path, first, b'"\xc0\xaf\xc0\xaf"'),
            "surrogate": body_with(path, first, b'"\xed\xa0\x80"'),
            "truncated": body_with(path, first, b'"abc\xe2\x82"'),
            "stray": valid_body(path)[:-1] + b", \x80}",
            "latin1": body_with(path, first, '"p\xe4ssw\xf6rd \xe9t\xe9"'.encode("latin-1")),
        }
        for label, body in variants.items():
            yield Case(f"utf8-{slug(path)}-{label}", path, body)


STRING_FIELDS = {
    "userId",
    "tradeId",
    "txHash",
    "recipient",
    "fiat",
    "side",
    "status",
    "password",
    "cryptoAmount",
    "fiatAmount",
    "amount",
}


def escapes() -> Iterator[Case]:
    """Valid JSON escapes that make bad strings: a lone surrogate (cannot be encoded back to
    UTF-8), a reversed pair, NUL; in every string field."""
    for path in BODIES:
        for name in fields_of(path):
            if name not in STRING_FIELDS or (path, name) in IGNORED_FIELDS:
                continue
            password = name == "password"
            # A password long enough that only the surrogate makes it bad.
            values = {
                "lone-surrogate": b'"abcdefgh\\ud800ijkl"',
                "reversed-pair": b'"abcdefgh\\udc00\\ud800"',
            }
            if not password:
                values["nul"] = b'"\\u0000"'
            # A wrong password may also be told as such: 401 (spec) or 400.
            expect = frozenset({400, 401}) if password and path != "/create" else frozenset({400})
            for label, raw in values.items():
                yield Case(
                    f"escape-{slug(path)}-{name}-{label}",
                    path,
                    body_with(path, name, raw),
                    expect=expect,
                )


def overlong() -> Iterator[Case]:
    """A 60,000-character string in every field (the body stays under 64 KB); a body over
    the cap, sized and chunked."""
    for path in BODIES:
        for name in fields_of(path):
            if (path, name) in IGNORED_FIELDS:
                continue
            yield Case(
                f"long-{slug(path)}-{name}", path, body_with(path, name, encode("9" * 60_000))
            )
    for path in ("/trades", "/send", "/prices"):
        big = body_with(path, fields_of(path)[0], encode("a" * 70_000))
        yield Case(f"long-{slug(path)}-over-cap", path, big)
        yield Case(f"long-{slug(path)}-over-cap-chunked", path, big, chunked=True)


def wrong_types() -> Iterator[Case]:
    """A huge number, a boolean or an object where each field wants something else."""
    values = [b"1" + b"0" * 400, b"true", b'{"$gt": ""}', b"[1]"]
    for path in BODIES:
        if path in NO_BODY:
            continue
        for i, name in enumerate(fields_of(path)):
            raw = values[i % len(values)]
            yield Case(
                f"type-{slug(path)}-{name}-{raw[:6].decode()}", path, body_with(path, name, raw)
            )


def unknown_fields() -> Iterator[Case]:
    """Unknown fields: a plain one, a 60 KB name (the answer stays short and does not echo
    the name beyond the cap), an HTML name (not echoed as markup), control characters."""
    for path in BODIES:
        yield Case(f"unknown-{slug(path)}-plain", path, body_with(path, "nope", b"1"))
        yield Case(
            f"unknown-{slug(path)}-60kb-name",
            path,
            body_with(path, "x" * 60_000, b"1"),
            checks=("short-message",),
        )
        yield Case(
            f"unknown-{slug(path)}-html-name",
            path,
            body_with(path, "<script>alert(1)</script><img src=x onerror=alert(1)>", b"1"),
            checks=("no-html", "short-message"),
        )
    for path in ("/trades", "/prices"):
        yield Case(
            f"unknown-{slug(path)}-control-name",
            path,
            body_with(path, "\x1b[31mred\x1b[0m\r\nX-Injected: 1", b"1"),
            checks=("short-message", "no-crlf"),
        )


def duplicate_keys() -> Iterator[Case]:
    """The first field twice, with the same value (today the last silently wins)."""
    for path, body in BODIES.items():
        name = fields_of(path)[0]
        value = encode(body.get(name, 1))
        pairs = [(encode(k), encode(v)) for k, v in body.items()] or [(b'"a"', b"1")]
        yield Case(f"dup-{slug(path)}-{name}", path, render([*pairs, (encode(name), value)]))


ASSET_ENDPOINTS = tuple(p for p in BODIES if "assetId" in BODIES[p])
ASSET_VALUES_ALL = {
    "21.0": b"21.0",
    "2.0": b"2.0",
    "2e0": b"2e0",
    "1e2": b"1e2",
    "NaN": b"NaN",
    "Infinity": b"Infinity",
    "-Infinity": b"-Infinity",
    "-0": b"-0",
    "-0.0": b"-0.0",
    "1e400": b"1e400",
    "10pow400": b"1" + b"0" * 400,
    "2pow64": str(2**64).encode(),
    "true": b"true",
    "false": b"false",
    "str-2.0": b'"2.0"',
    "str-fullwidth": encode("\uff12"),
    "str-arabic": encode("\u0662"),
    "str-space": b'" 2"',
    "str-hex": b'"0x2"',
    "str-empty-obj": b"{}",
}
ASSET_VALUES_CORE = ("21.0", "1e2", "true", "10pow400", "str-fullwidth")


def asset_numbers() -> Iterator[Case]:
    """Floats for ints (21.0, 1e2, NaN, Infinity, -0), huge ints, booleans, look-alike
    digit strings: every value on four endpoints, five of them on the others."""
    full = ("/balance", "/sell", "/platform/balance", "/platform/send")
    for path in ASSET_ENDPOINTS:
        labels = ASSET_VALUES_ALL if path in full else ASSET_VALUES_CORE
        for label in labels:
            yield Case(
                f"asset-{slug(path)}-{label}",
                path,
                body_with(path, "assetId", ASSET_VALUES_ALL[label]),
            )


def body_shapes() -> Iterator[Case]:
    """Bodies that are not one JSON object: null, arrays, scalars, empty, broken JSON."""
    shapes = {
        "null": b"null",
        "empty-array": b"[]",
        "array-of-body": None,  # [valid body]
        "string": b'"x"',
        "number": b"1",
        "true": b"true",
        "empty": b"",
        "blank": b"  \r\n ",
        "truncated": b'{"userId":',
        "two-objects": b"{}{}",
        "trailing-garbage": None,  # valid body + x
        "single-quotes": b"{'userId': 1}",
        "trailing-comma": b'{"a": 1,}',
        "comment": b"{/* c */}",
    }
    for path in BODIES:
        for label, raw in shapes.items():
            if path in NO_BODY and label in ("null", "empty", "blank"):
                continue  # no body, `{}` or null: accepted there by contract
            if raw is None:
                raw = (
                    (b"[" + valid_body(path) + b"]")
                    if label == "array-of-body"
                    else valid_body(path) + b"x"
                )
            yield Case(f"shape-{slug(path)}-{label}", path, raw)


def content_types() -> Iterator[Case]:
    """A body under anything but application/json (or application/*+json), or no
    Content-Type at all."""
    boundary = "hardening0boundary"
    for path, fields in BODIES.items():
        body = valid_body(path)
        form = "&".join(f"{k}={v}" for k, v in fields.items()) or "a=1"
        multipart = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="body"\r\n\r\n'
            f"{body.decode()}\r\n--{boundary}--\r\n"
        ).encode()
        variants: dict[str, tuple[bytes | None, bytes]] = {
            "text-plain": (b"text/plain", body),
            "form": (b"application/x-www-form-urlencoded", form.encode()),
            "form-json-body": (b"application/x-www-form-urlencoded", body),
            "multipart": (f"multipart/form-data; boundary={boundary}".encode(), multipart),
            "missing": (None, body),
            "xml": (b"application/xml", body),
        }
        for label, (ctype, raw) in variants.items():
            yield Case(f"ctype-{slug(path)}-{label}", path, raw, content_type=ctype)


#: Authorization values, built against the running server (its key, client A's claims).
TOKENS: dict[str, Callable[[Server], bytes]] = {
    "exp-1e18": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], exp=10**18))),
    "exp-minus-1e18": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], exp=-(10**18)))),
    "exp-float-1e18": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], exp=1e18))),
    "exp-1e400": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], exp=10**400))),
    "exp-past": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], exp=1))),
    "iat-1e18": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], iat=10**18))),
    "iat-minus-1e18": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], iat=-(10**18)))),
    "alg-none": lambda s: bearer(unsigned(claims(s.clients["A"]))),
    "alg-none-signed": lambda s: bearer(
        forge_token(s.home, claims(s.clients["A"]), header={"alg": "none", "typ": "JWT"})
    ),
    "alg-hs256": lambda s: bearer(hs256_token(s)),
    "tampered-claims": lambda s: bearer(tampered(s)),
    "tampered-signature": lambda s: bearer(flip_last(s.clients["A"].token(s.base))),
    "other-key": lambda s: bearer(
        forge_token(s.home, claims(s.clients["A"]), seed=secrets.token_bytes(32))
    ),
    "unknown-client": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], sub="0" * 24))),
    "other-generation": lambda s: bearer(forge_token(s.home, claims(s.clients["A"], gen=2))),
    "sub-list": lambda s: bearer(
        forge_token(s.home, claims(s.clients["A"], sub=[s.clients["A"].client_id]))
    ),
    "payload-not-json": lambda s: bearer(forge_token(s.home, b"\xff\xfe{")),
    "payload-array": lambda s: bearer(forge_token(s.home, b"[]")),
    "payload-deep": lambda s: bearer(forge_token(s.home, arrays(300))),
    "2kb": lambda s: bearer("a" * 2048),
    "2kb-jws-shaped": lambda s: bearer("a" * 700 + "." + "b" * 700 + "." + "c" * 700),
    "non-ascii": lambda s: b"Bearer \xc3\xa9\xff\xfe" + s.clients["A"].token(s.base).encode()[4:],
    "bare-bearer": lambda s: b"Bearer",
    "basic": lambda s: b"Basic dXNlcjpwYXNz",
    "two-tokens": lambda s: bearer(
        f"{s.clients['A'].token(s.base)} {s.clients['A'].token(s.base)}"
    ),
    "none": lambda s: b"",
}
TOKENS_EVERYWHERE = ("exp-1e18", "alg-none", "tampered-claims")


def unsigned(payload: dict[str, Any]) -> str:
    """`alg: none`, no signature (the classic JWT bypass)."""
    head = b64url(b'{"alg":"none","typ":"JWT"}')
    return f"{head}.{b64url(json.dumps(payload).encode())}."


def bearer(token: str) -> bytes:
    return f"Bearer {token}".encode()


def flip_last(token: str) -> str:
    return token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]


def tampered(server: Server) -> str:
    """A real token of A with the claims swapped for B's (the signature is A's)."""
    header, _, signature = server.clients["A"].token(server.base).split(".")
    body = b64url(json.dumps(claims(server.clients["B"])).encode())
    return f"{header}.{body}.{signature}"


def hs256_token(server: Server) -> str:
    """alg confusion: HS256 keyed with the public key bytes."""
    import hashlib
    import hmac

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    private = Ed25519PrivateKey.from_private_bytes(token_seed(server.home))
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    head = b64url(b'{"alg":"HS256","typ":"JWT"}')
    body = b64url(json.dumps(claims(server.clients["A"])).encode())
    mac = hmac.new(public, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(mac)}"


def tokens() -> Iterator[Case]:
    """Invalid tokens: 401 `Missing or expired token`, never a 500 (exp=10**18 was one)."""
    for path in BODIES:
        for recipe in TOKENS_EVERYWHERE:
            yield Case(
                f"token-{slug(path)}-{recipe}",
                path,
                valid_body(path),
                auth=recipe,
                expect=frozenset({401}),
                message=EXPIRED,
            )
    for path in ("/prices", "/trades", "/platform/balance"):
        for recipe in TOKENS:
            if recipe in TOKENS_EVERYWHERE:
                continue
            yield Case(
                f"token-{slug(path)}-{recipe}",
                path,
                valid_body(path),
                auth=recipe,
                expect=frozenset({401}),
                message=EXPIRED,
            )
    # The first Authorization header invalid, a valid one after it.
    yield Case(
        "token-prices-repeated",
        "/prices",
        None,
        auth="none",
        headers=(("authorization", b"Bearer nope"), ("authorization", b"@A@")),
        expect=frozenset({400, 401}),
    )


def auth_endpoint() -> Iterator[Case]:
    """/auth with wrong, malformed or oversized credentials: 401 `Invalid credentials`."""
    wrong = {
        "missing": (),
        "wrong-key": (("x-client-id", b"@A_ID@"), ("x-api-key", b"wck_" + b"A" * 43)),
        "other-clients-key": (("x-client-id", b"@A_ID@"), ("x-api-key", b"@B_KEY@")),
        "sql-id": (("x-client-id", b"' OR '1'='1' --"), ("x-api-key", b"x")),
        "empty": (("x-client-id", b""), ("x-api-key", b"")),
    }
    for label, headers in wrong.items():
        yield Case(
            f"auth-{label}",
            "/auth",
            None,
            content_type=None,
            headers=headers,
            auth="none",
            expect=frozenset({401}),
            message=INVALID_CREDENTIALS,
        )
    garbage = {
        "non-ascii-key": (("x-client-id", b"@A_ID@"), ("x-api-key", b"wck_\xc3\xa9\xff\xfe")),
        "non-ascii-id": (("x-client-id", b"\xff\xfe" * 12), ("x-api-key", b"@A_KEY@")),
        "10kb-key": (("x-client-id", b"@A_ID@"), ("x-api-key", b"k" * 10_000)),
        "10kb-id": (("x-client-id", b"i" * 10_000), ("x-api-key", b"@A_KEY@")),
        "repeated-id": (
            ("x-client-id", b"0" * 24),
            ("x-client-id", b"@A_ID@"),
            ("x-api-key", b"@A_KEY@"),
        ),
    }
    for label, headers in garbage.items():
        yield Case(
            f"auth-{label}",
            "/auth",
            None,
            content_type=None,
            headers=headers,
            auth="none",
            expect=frozenset({400, 401}),
        )


def request_ids() -> Iterator[Case]:
    """X-Request-Id not 1 to 128 printable ASCII characters sent once: a 400 whose
    requestId is a fresh one, not the bytes sent."""
    variants = {
        "high-bytes": (("x-request-id", b"id-\x80\xff\xfe"),),
        "tab": (("x-request-id", b"id\twith\ttabs"),),
        "129-chars": (("x-request-id", b"r" * 129),),
        "10kb": (("x-request-id", b"r" * 10_000),),
        "repeated": (("x-request-id", b"one"), ("x-request-id", b"two")),
    }
    for path in ("/auth", "/prices", "/trades", "/create", "/send", "/platform/send"):
        for label, headers in variants.items():
            auth = "none" if path == "/auth" else "A"
            body = None if path == "/auth" else valid_body(path)
            yield Case(
                f"reqid-{slug(path)}-{label}",
                path,
                body,
                headers=headers,
                auth=auth,
                content_type=None if body is None else b"application/json",
                message=INVALID_REQUEST_ID,
                checks=("fresh-request-id",),
            )


def user_headers() -> Iterator[Case]:
    """X-USER-ID on a platform endpoint is a 400 (spec); a malformed one on a user-scoped
    endpoint is a 400."""
    for path in PLATFORM:
        yield Case(
            f"xuser-{slug(path)}-platform",
            path,
            valid_body(path),
            headers=(("x-user-id", b"@USER@"),),
            message=USER_HEADER_REFUSED,
        )
    variants = {
        "23-hex": (("x-user-id", b"a" * 23),),
        "non-hex": (("x-user-id", b"g" * 24),),
        "10kb": (("x-user-id", b"a" * 10_000),),
        "high-bytes": (("x-user-id", b"\xff" * 24),),
        "repeated": (("x-user-id", b"@USER@"), ("x-user-id", b"@USER@")),
    }
    for path in ("/sell", "/trade", "/trades", "/addresses", "/balance", "/send"):
        for label, headers in variants.items():
            yield Case(f"xuser-{slug(path)}-{label}", path, valid_body(path), headers=headers)


BAD_IDS = {
    "empty": "",
    "23-hex": "a" * 23,
    "25-hex": "a" * 25,
    "non-hex": "g" * 24,
    "fullwidth-digits": "\uff10" * 24,
    "cyrillic-a": "\u0430" * 24,
    "sql": "' OR '1'='1' -- aaaaaaaa",
    "path": "../../../../../etc/passw",
    "newline": "a" * 12 + "\n" + "a" * 11,
}
BAD_HASHES = {
    "empty": "",
    "non-hex": "0x" + "g" * 64,
    "dots": "../../etc/passwd",
    "cyrillic": "0x" + "\u0430" * 64,
    "fullwidth": "0x" + "\uff11" * 64,
    "sql": "0x" + "ab" * 32 + "'; DROP TABLE sends; --",
    "1kb": "a" * 1024,
}


def ids() -> Iterator[Case]:
    """userId / tradeId not 24 hex characters: 400; txHash not a hash: 400 (or 404 for a
    well-formed hash of nothing)."""
    for path in ("/trades", "/addresses", "/balance"):
        for label, value in BAD_IDS.items():
            yield Case(
                f"id-{slug(path)}-userId-{label}", path, body_with(path, "userId", encode(value))
            )
    for label, value in BAD_IDS.items():
        yield Case(
            f"id-trade-tradeId-{label}", "/trade", body_with("/trade", "tradeId", encode(value))
        )
    for path in ("/txid", "/platform/txid"):
        for label, value in BAD_HASHES.items():
            yield Case(
                f"id-{slug(path)}-txHash-{label}",
                path,
                body_with(path, "txHash", encode(value)),
                expect=frozenset({400, 404}),
            )


BAD_AMOUNTS: dict[str, bytes] = {
    "exp": b'"1e2"',
    "exp-negative": b'"1E-5"',
    "negative": b'"-1"',
    "minus-zero": b'"-0"',
    "zero": b'"0"',
    "zero-point-zero": b'"0.0"',
    "plus": b'"+1"',
    "leading-dot": b'".5"',
    "trailing-dot": b'"5."',
    "comma": b'"1,5"',
    "underscore": b'"1_000"',
    "space": b'" 1"',
    "nan": b'"NaN"',
    "infinity": b'"Infinity"',
    "hex": b'"0x10"',
    "arabic": encode("\u0661"),
    "fullwidth": encode("\uff11"),
    "19-decimals": b'"0.0000000000000000001"',
    "1000-digits": encode("9" * 1000),
    "number": b"1.5",
    "huge-number": b"1" + b"0" * 400,
}


def amounts() -> Iterator[Case]:
    """Amounts with too many decimals, negative, exponent forms, other digits, numbers."""
    for path, name in (
        ("/sell", "cryptoAmount"),
        ("/order", "fiatAmount"),
        ("/fee", "amount"),
        ("/send", "amount"),
        ("/platform/send", "amount"),
    ):
        for label, raw in BAD_AMOUNTS.items():
            yield Case(f"amount-{slug(path)}-{name}-{label}", path, body_with(path, name, raw))
    usdt = {**BODIES["/fee"], "assetId": 21, "amount": "0.0000001"}  # USDT has 6 decimals
    yield Case("amount-fee-usdt-7-decimals", "/fee", encode(usdt))
    both = {**BODIES["/sell"], "fiatAmount": "10"}
    yield Case("amount-sell-both", "/sell", encode(both))
    neither = {k: v for k, v in BODIES["/sell"].items() if k != "cryptoAmount"}
    yield Case("amount-sell-neither", "/sell", encode(neither))


def routing() -> Iterator[Case]:
    """Unknown paths, wrong methods: the envelope too (404, 405)."""
    yield Case("route-unknown", "/nowhere", b"{}", expect=frozenset({404}))
    yield Case("route-encoded-nul", "/trades%00", b"{}", expect=frozenset({404}))
    yield Case("route-encoded-ff", "/%ff%fe", b"{}", expect=frozenset({404}))
    yield Case("route-long", "/" + "a" * 4000, b"{}", expect=frozenset({404, 414}))
    for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
        yield Case(
            f"route-{method}-trades",
            "/trades",
            None,
            content_type=None,
            method=method,
            expect=frozenset({405}),
        )


def corpus() -> list[Case]:
    cases = [
        *nesting(),
        *bad_utf8(),
        *escapes(),
        *overlong(),
        *wrong_types(),
        *unknown_fields(),
        *duplicate_keys(),
        *asset_numbers(),
        *body_shapes(),
        *content_types(),
        *tokens(),
        *auth_endpoint(),
        *request_ids(),
        *user_headers(),
        *ids(),
        *amounts(),
        *routing(),
    ]
    names = [c.id for c in cases]
    assert len(names) == len(set(names)), "case ids must be unique"
    return cases


CORPUS = corpus()


# -- running a case --------------------------------------------------------------------------
def substitute(data: bytes, server: Server) -> bytes:
    a = server.clients["A"]
    for placeholder, value in (
        (b"@USER@", a.user),
        (b"@TRADE@", a.trades["completed"]),
        (b"@TX@", a.user_tx),
        (b"@PTX@", a.platform_tx),
        (b"@A_ID@", a.client_id),
        (b"@A_KEY@", a.api_key),
        (b"@B_KEY@", server.clients["B"].api_key),
        (b"@A@", b"Bearer " + a.token(server.base).encode()),
    ):
        if placeholder in data:
            data = data.replace(
                placeholder, value if isinstance(value, bytes) else str(value).encode()
            )
    return data


def send(server: Server, case: Case) -> httpx.Response:
    headers: list[tuple[str, bytes]] = []
    if case.auth == "A":
        headers.append(
            ("authorization", f"Bearer {server.clients['A'].token(server.base)}".encode())
        )
    elif case.auth != "none":
        value = TOKENS[case.auth](server)
        if value:
            headers.append(("authorization", value))
    if case.content_type is not None and (case.body is not None or case.method == "POST"):
        headers.append(("content-type", case.content_type))
    if case.path in SENDS and not any(k == "x-request-id" for k, _ in case.headers):
        headers.append(("x-request-id", f"corpus-{secrets.token_hex(8)}".encode()))
    headers.extend((k, substitute(v, server)) for k, v in case.headers)
    content: Any = None
    if case.body is not None:
        body = substitute(case.body, server)
        content = iter_chunks(body) if case.chunked else body
    # A connection per case: on two workers, either may take it.
    headers.append(("connection", b"close"))
    return server.http.request(case.method, case.path, content=content, headers=headers)


CHECKS: dict[str, Callable[[dict[str, Any], Case, httpx.Response], None]] = {}


def check(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        CHECKS[name] = fn
        return fn

    return register


@check("short-message")
def _short_message(body: dict[str, Any], case: Case, response: httpx.Response) -> None:
    message = body["message"]
    assert len(message) < 300, f"{len(message)} characters: {message[:120]!r}..."
    assert "x" * (NAME_ECHO_CAP + 1) not in message, "the field name is echoed beyond the cap"


@check("no-html")
def _no_html(body: dict[str, Any], case: Case, response: httpx.Response) -> None:
    assert "<script" not in body["message"].lower() and "<img" not in body["message"].lower(), body


@check("no-crlf")
def _no_crlf(body: dict[str, Any], case: Case, response: httpx.Response) -> None:
    assert "x-injected" not in {k.lower() for k in response.headers}
    assert "\r" not in body["message"] and "\n" not in body["message"], body


@check("fresh-request-id")
def _fresh_request_id(body: dict[str, Any], case: Case, response: httpx.Response) -> None:
    sent = [v for k, v in case.headers if k == "x-request-id"]
    assert body["requestId"].encode() not in sent, body
    assert body["requestId"].isascii() and body["requestId"].isprintable(), body


def assert_still_serving(server: Server, workers_before: set[int]) -> None:
    """The process and every worker that served the case are still there, and the service
    answers /prices 200 on a new connection."""
    healthy = False
    try:
        assert server.alive(), f"the server process exited:\n{server.log_tail()}"
        assert server.worker_pids() == workers_before, (
            f"a worker died: {sorted(workers_before)} -> {sorted(server.worker_pids())}\n"
            f"{server.log_tail()}"
        )
        assert server.answers(), f"the server stopped answering /prices:\n{server.log_tail()}"
        healthy = True
    finally:
        if not healthy:
            server.stop()  # the next case starts it again (and counts a restart)


# -- the tests -------------------------------------------------------------------------------
def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 150
    assert {c.path for c in CORPUS} >= set(BODIES) | {"/auth"}


@pytest.mark.parametrize("path", list(BODIES))
def test_each_valid_body_is_accepted(server: Server, path: str) -> None:
    """Control: the unmutated bodies get their ordinary answer, so a mutation's 400 is the
    mutation's."""
    response = send(server, Case(f"control-{path}", path, valid_body(path), expect=frozenset()))
    assert response.status_code == CONTROL[path], response.text


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_bad_input_gets_a_4xx_envelope_and_the_server_survives(server: Server, case: Case) -> None:
    workers = server.worker_pids()
    try:
        response = send(server, case)
    except httpx.TransportError as exc:
        assert_still_serving(server, workers)
        raise AssertionError(f"no answer ({type(exc).__name__}: {exc})") from exc
    try:
        assert response.status_code < 500, f"{response.status_code}: {response.text[:300]!r}"
        body = assert_error_envelope(response, case.expect, case.message)
        for name in case.checks:
            CHECKS[name](body, case, response)
    finally:
        assert_still_serving(server, workers)


# -- malformed HTTP: the server's own parser answers -----------------------------------------
def raw_request(
    *lines: bytes, body: bytes = b"", start: bytes = b"POST /prices HTTP/1.1", eol: bytes = b"\r\n"
) -> bytes:
    head = [start, b"Host: 127.0.0.1", b"Authorization: @AUTH@", b"Connection: close", *lines]
    return eol.join(head) + eol + eol + body


RAW: dict[str, bytes] = {
    "control-byte-in-header": raw_request(b"X-Evil: a\x01b", b"Content-Length: 0"),
    "nul-in-header": raw_request(b"X-Evil: a\x00b", b"Content-Length: 0"),
    "del-in-request-id": raw_request(b"X-Request-Id: a\x7fb", b"Content-Length: 0"),
    "cr-in-header-value": raw_request(b"X-Evil: a\rb", b"Content-Length: 0"),
    "500-headers": raw_request(*(b"X-H%d: v" % i for i in range(500)), b"Content-Length: 0"),
    "5000-headers": raw_request(*(b"X-H%d: v" % i for i in range(5000)), b"Content-Length: 0"),
    "100kb-header": raw_request(b"X-Big: " + b"v" * 100_000, b"Content-Length: 0"),
    "space-in-header-name": raw_request(b"Bad Header: x", b"Content-Length: 0"),
    "header-without-colon": raw_request(b"NoColonHere", b"Content-Length: 0"),
    "obs-fold": raw_request(b"X-A: a", b" folded", b"Content-Length: 0"),
    "bare-lf": raw_request(b"Content-Length: 0", eol=b"\n"),
    "garbage-request-line": b"GARBAGE\r\n\r\n",
    "only-crlf": b"\r\n\r\n\r\n",
    "http-9.9": raw_request(b"Content-Length: 0", start=b"POST /prices HTTP/9.9"),
    "http-0.9": b"GET /\r\n",
    "100kb-url": raw_request(b"Content-Length: 0", start=b"POST /" + b"a" * 100_000 + b" HTTP/1.1"),
    "nul-in-path": raw_request(b"Content-Length: 0", start=b"POST /pri\x00ces HTTP/1.1"),
    "high-bytes-in-path": raw_request(b"Content-Length: 0", start=b"POST /\xff\xfe HTTP/1.1"),
    "absolute-form": raw_request(
        b"Content-Length: 0", start=b"POST http://evil.example/prices HTTP/1.1"
    ),
    "lowercase-method": raw_request(b"Content-Length: 0", start=b"post /prices HTTP/1.1"),
    "10kb-method": raw_request(b"Content-Length: 0", start=b"P" * 10_000 + b" /prices HTTP/1.1"),
    "missing-host": b"POST /prices HTTP/1.1\r\nAuthorization: @AUTH@\r\nContent-Length: 0\r\n\r\n",
    "negative-content-length": raw_request(b"Content-Length: -1"),
    "content-length-not-a-number": raw_request(b"Content-Length: abc"),
    "two-content-lengths": raw_request(b"Content-Length: 2", b"Content-Length: 3", body=b"{}"),
    "content-length-and-chunked": raw_request(
        b"Content-Length: 5", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n"
    ),
    "transfer-encoding-gzip": raw_request(b"Transfer-Encoding: gzip", body=b"{}"),
    "transfer-encoding-xchunked": raw_request(b"Transfer-Encoding: xchunked", body=b"{}"),
    "bad-chunk-size": raw_request(b"Transfer-Encoding: chunked", body=b"zz\r\n{}\r\n0\r\n\r\n"),
    "chunk-size-overflow": raw_request(
        b"Transfer-Encoding: chunked", body=b"ffffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"
    ),
    "truncated-body": raw_request(
        b"Content-Length: 100", b"Content-Type: application/json", body=b'{"a": 1'
    ),
    "expect-100-1gb": raw_request(
        b"Expect: 100-continue", b"Content-Length: 1000000000", b"Content-Type: application/json"
    ),
    "pipelined-50": raw_request(b"Content-Length: 0").replace(b"Connection: close", b"X-Keep: 1")
    * 50,
    "smuggled-deep-body": raw_request(b"Content-Length: 0").replace(
        b"Connection: close", b"X-Keep: 1"
    )
    + raw_request(
        b"Content-Type: application/json",
        b"Content-Length: 60012",
        body=b'{"userId": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
        start=b"POST /trades HTTP/1.1",
    ),
    "h2-prior-knowledge": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    "tls-client-hello": bytes.fromhex("16030100a5010000a10303")
    + b"\x00" * 32
    + b"\x00\x00\x02\x13\x01\x01\x00",
    "websocket-upgrade": raw_request(
        b"Connection: Upgrade",
        b"Upgrade: websocket",
        b"Sec-WebSocket-Version: 13",
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        start=b"GET /prices HTTP/1.1",
    ),
    "connect-and-close": b"",
}


def exchange(server: Server, data: bytes, wait: float = 1.0) -> tuple[str, bytes]:
    """Send raw bytes on a fresh connection; (what came back, the bytes read).

    Reads until the server closes, or `wait` seconds pass without a byte (a server
    waiting for more of a request, or keeping the connection open after answering)."""
    import socket

    received = b""
    data = data.replace(b"@AUTH@", f"Bearer {server.clients['A'].token(server.base)}".encode())
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        if not data:
            return "closed by us, nothing sent", received
        try:
            if data:
                sock.sendall(data)
        except OSError as exc:  # the server may close before reading everything
            outcome = f"send failed: {type(exc).__name__}"
        else:
            outcome = ""
        sock.settimeout(wait)
        closed = False
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    closed = True
                    break
                received += chunk
        except TimeoutError:
            pass
        except OSError as exc:
            outcome = outcome or f"reset: {type(exc).__name__}"
            closed = True
    # Responses follow each other without a separator (a body, then `HTTP/1.1 ...`).
    statuses = [m.decode() for m in re.findall(rb"HTTP/1\.[01] ([0-9]{3}) ", received)]
    more = "..." if len(statuses) > 3 else ""
    parts = [f"statuses {','.join(statuses[:3])}{more} (x{len(statuses)})"] if statuses else []
    parts.append(outcome or ("closed" if closed else "left open"))
    return "; ".join(parts), received


@pytest.mark.parametrize("name", list(RAW))
def test_malformed_http_leaves_the_server_standing(
    sqlite_server: Server, name: str, record_property: Any
) -> None:
    """Malformed HTTP is granian's (hyper's) to answer: a 4xx, a closed connection or
    silence are all fine. What it answers is recorded (`record_property`, and printed
    with -s); what must hold: every worker and the process survive, the service answers
    /prices, and an answer that came from the app (the envelope) is never a 5xx.

    On the SQLite server only: the HTTP parser is the same whatever the storage."""
    server = sqlite_server
    server.ensure_running()
    workers = server.worker_pids()
    outcome, received = exchange(server, RAW[name])
    record_property("answer", outcome)
    print(f"\n{server.name} {name}: {outcome}")
    assert_still_serving(server, workers)
    for block in received.split(b"HTTP/1.")[1:]:
        status = block.split(b" ", 2)[1][:3] if b" " in block else b""
        if status.isdigit() and b'"requestId"' in block:
            assert int(status) < 500, block[:300]


def test_the_server_survived_the_corpus(served: Server) -> None:
    """After every case: the same process as first started, never restarted, answering."""
    assert served.alive(), served.log_tail()
    assert served.restarts == 0, f"the server died {served.restarts} time(s) during the corpus"
    assert served.proc is not None and served.proc.pid == served.first_pid
    assert served.answers()
    assert len(served.worker_pids()) == served.workers
