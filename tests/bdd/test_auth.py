"""Steps of features/auth.feature (the shared ones live in conftest.py)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pytest_bdd import given, parsers, scenarios, then, when

from walletcore.domain.ids import new_id
from walletcore.domain.times import format_datetime
from walletcore.services.auth import IssuedToken
from walletcore.services.tokens import TokenClaims, TokenSigner

if TYPE_CHECKING:
    from conftest import World

scenarios("auth.feature")

TOKEN_LIFETIME = timedelta(minutes=15)
DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
#: token label in step text -> key in world.tokens ("old" is the first token the client held)
LABELS = {None: "first", "old": "first", "new": "new", "other api client's": "other"}


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- authenticating --------------------------------------------------------------------------
def credentials(world: World, words: str) -> tuple[object, object]:
    party = world.parties["the api client"]
    key = party.api_key
    if words in (
        "its client id and api key",
        "its client id and its api key",
        "its client id and new api key",
    ):
        return party.client_id, key
    if words == "its client id and old api key":
        return party.client_id, world.tokens["old api key"]
    if words == "its client id and a wrong api key":
        return party.client_id, key[:-4] + ("aaaa" if not key.endswith("aaaa") else "bbbb")
    if words == "its client id and no api key":
        return party.client_id, None
    if words == "an unknown client id and its api key":
        return new_id(), key
    if words == "a client id that is not an id and its api key":
        return "acme-pay", key
    if words == "no client id and its api key":
        return None, key
    if words == "its client id and another api client's key":
        other = world.run(world.container.auth().create_client("Somebody Else"))
        return party.client_id, other.api_key
    raise AssertionError(f"unknown credentials {words!r}")


def authenticate(world: World, client_id: object, api_key: object, label: str) -> None:
    request_id = world.next_request_id()
    world.tokens.setdefault("auth requests", []).append(request_id)
    issued = world.attempt(
        lambda: world.container.auth().authenticate(client_id, api_key, request_id)
    )
    if issued is not None:
        world.tokens[label] = (issued, world.clock.now())


@given("the api client holds a token")
def holds_token(world: World) -> None:
    party = world.parties["the api client"]
    authenticate(world, party.client_id, party.api_key, "first")
    world.succeeded()


@given("the other api client holds a token")
def other_holds_token(world: World) -> None:
    party = world.parties["another api client"]
    authenticate(world, party.client_id, party.api_key, "other")
    world.succeeded()


@when(parsers.parse("the api client authenticates with {words}"))
def authenticates(world: World, words: str) -> None:
    client_id, api_key = credentials(world, words)
    label = "new" if ("new" in words or "first" in world.tokens) else "first"
    authenticate(world, client_id, api_key, label)


@when(parsers.parse("the api client authenticates {times:d} times with {words}"))
def authenticates_times(world: World, times: int, words: str) -> None:
    """Each a second after the one before; what storage held before the first is kept."""
    world.tokens.setdefault("stored before", _stored(world))
    for _ in range(times):
        world.clock.advance(1)
        client_id, api_key = credentials(world, words)
        authenticate(world, client_id, api_key, "refused")
        world.tokens.setdefault("refusals", []).append((world.error, world.clock.now()))


@when("the api client authenticates again with the same credentials")
def authenticates_again(world: World) -> None:
    party = world.parties["the api client"]
    authenticate(world, party.client_id, party.api_key, "new")


@then("it receives a token")
def receives_token(world: World) -> None:
    issued = world.succeeded()
    assert isinstance(issued, IssuedToken)
    assert isinstance(issued.token, str) and issued.token
    assert world.parties["the api client"].api_key not in issued.token
    assert issued.token not in repr(issued)


@then(parsers.re(r"the (?:(?P<label>new) )?token expires 15 minutes after it was issued"))
def expires_in_15_minutes(world: World, label: str | None) -> None:
    issued, at = world.tokens[LABELS[label]]
    assert issued.expires_at == at + TOKEN_LIFETIME
    assert DATETIME.match(format_datetime(issued.expires_at))


@then(parsers.parse('the authentication is refused with 401 "{message}"'))
def auth_refused(world: World, message: str) -> None:
    assert world.error is not None, "expected a refusal"
    assert (world.error.status, world.error.message) == (401, message)


@then(parsers.parse('the api client authenticating with {words} is refused with 401 "{message}"'))
def authenticating_refused(world: World, words: str, message: str) -> None:
    client_id, api_key = credentials(world, words)
    authenticate(world, client_id, api_key, "refused")
    auth_refused(world, message)


@then(parsers.parse('every one of them is refused with 401 "{message}"'))
def all_refused(world: World, message: str) -> None:
    refusals = world.tokens["refusals"]
    assert refusals
    assert all((e.status, e.message) == (401, message) for e, _ in refusals), refusals


@then("no token is issued")
def no_token(world: World) -> None:
    assert world.answer is None and "first" not in world.tokens


# -- using a token ---------------------------------------------------------------------------
def present(world: World, authorization: str | None) -> None:
    world.attempt(lambda: world.container.auth().verify(authorization))


def token_text(world: World, label: str | None) -> str:
    issued: IssuedToken = world.tokens[LABELS[label]][0]
    return issued.token


@then(
    parsers.re(r"a request with the (?:(?P<label>old|new|other api client's) )?token is accepted")
)
def token_accepted(world: World, label: str | None) -> None:
    present(world, f"Bearer {token_text(world, label)}")
    party = "another api client" if label == "other api client's" else "the api client"
    assert world.succeeded().client_id == world.parties[party].client_id


@then(
    parsers.re(
        r'a request with the (?:(?P<label>old|new) )?token is refused with 401 "(?P<message>[^"]+)"'
    )
)
def token_refused(world: World, label: str | None, message: str) -> None:
    present(world, f"Bearer {token_text(world, label)}")
    auth_refused(world, message)


@then(parsers.parse('a request without a token is refused with 401 "{message}"'))
def no_token_refused(world: World, message: str) -> None:
    for authorization in (None, "", "Bearer", "Bearer "):
        present(world, authorization)
        auth_refused(world, message)


def _altered_signature(world: World, token: str) -> str:
    header, body, signature = token.split(".")
    raw = bytearray(_b64d(signature))
    raw[0] ^= 0x01
    return f"Bearer {header}.{body}.{_b64e(bytes(raw))}"


def _pushed_expiry(world: World, token: str) -> str:
    header, body, signature = token.split(".")
    payload = json.loads(_b64d(body))
    payload["exp"] += 3600
    return (
        f"Bearer {header}.{_b64e(json.dumps(payload, separators=(',', ':')).encode())}.{signature}"
    )


def _claims(token: str) -> TokenClaims:
    payload = json.loads(_b64d(token.split(".")[1]))
    from datetime import UTC, datetime

    return TokenClaims(
        payload["sub"],
        payload["gen"],
        datetime.fromtimestamp(payload["iat"], UTC),
        datetime.fromtimestamp(payload["exp"], UTC),
    )


def _other_service(world: World, token: str) -> str:
    return f"Bearer {TokenSigner(hashlib.sha256(b'another service').digest()).sign(_claims(token))}"


def _other_algorithm(world: World, token: str) -> str:
    """Signed with the service's own key, but the header names HS256: still refused."""
    from nacl.signing import SigningKey

    _, body, _ = token.split(".")
    header = _b64e(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    key = SigningKey(world.container.token_key())
    signature = key.sign(f"{header}.{body}".encode()).signature
    return f"Bearer {header}.{body}.{_b64e(signature)}"


def _hmac_confusion(world: World, token: str) -> str:
    """The classic HS256-with-the-public-key forgery."""
    from nacl.signing import SigningKey

    _, body, _ = token.split(".")
    header = _b64e(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    public = bytes(SigningKey(world.container.token_key()).verify_key)
    mac = hmac.new(public, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"Bearer {header}.{body}.{_b64e(mac)}"


def _stripped(world: World, token: str) -> str:
    _, body, _ = token.split(".")
    header = _b64e(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"Bearer {header}.{body}."


FORGERIES: dict[str, Callable[[World, str], str]] = {
    "the token whose signature was altered": _altered_signature,
    "the token whose expiry was pushed back": _pushed_expiry,
    "the token re-signed by another service": _other_service,
    "the token claiming another signing algorithm": _other_algorithm,
    "the token stripped of its signature": _stripped,
    "the token sent under another scheme than Bearer": lambda w, t: f"Basic {t}",
    "a string that is not a token at all": lambda w, t: "Bearer not-a-token",
}


@then(
    parsers.re(
        r"a request with (?P<forgery>"
        + "|".join(re.escape(k) for k in FORGERIES)
        + r') is refused with 401 "(?P<message>[^"]+)"'
    )
)
def forgery_refused(world: World, forgery: str, message: str) -> None:
    token = token_text(world, None)
    forged = FORGERIES[forgery](world, token)
    assert forged != f"Bearer {token}"
    present(world, forged)
    auth_refused(world, message)
    if forgery == "the token claiming another signing algorithm":
        present(world, _hmac_confusion(world, token))
        auth_refused(world, message)
    # the genuine token is still good: the refusal was about the forgery
    token_accepted(world, None)


# -- the operator ----------------------------------------------------------------------------
@when("the operator disables the api client")
def disable(world: World) -> None:
    world.run(world.container.auth().disable_client(world.parties["the api client"].client_id))


@when("the operator rotates the api client's key")
def rotate(world: World) -> None:
    party = world.parties["the api client"]
    issued = world.run(world.container.auth().rotate_key(party.client_id))
    world.tokens["old api key"] = party.api_key
    assert issued.api_key != party.api_key
    party.api_key = issued.api_key


# -- what is stored ---------------------------------------------------------------------------
@then(parsers.re(r"the stored api client holds the SHA-256 hash of its (?:new )?api key"))
def stored_hash(world: World) -> None:
    party = world.parties["the api client"]
    stored = world.run(world.db.clients.get(party.client_id))
    assert stored is not None
    assert stored.key_hash == hashlib.sha256(party.api_key.encode()).hexdigest()
    assert party.api_key not in repr(stored)


def _strings(value: Any, seen: set[int]) -> list[str]:
    """Every string (and bytes, decoded) reachable from `value`."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes | bytearray):
        return [bytes(value).decode("latin-1")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k, seen) + _strings(v, seen)]
    if isinstance(value, list | tuple | set | frozenset):
        return [s for v in value for s in _strings(v, seen)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name), seen)
        ]
    if hasattr(value, "__dict__"):
        return _strings(vars(value), seen)
    return [repr(value)]


@then("the api key appears nowhere in storage or in the audit log")
def key_nowhere(world: World) -> None:
    key = world.parties["the api client"].api_key
    everything = _strings(world.storage, set())
    assert any(world.parties["the api client"].client_id in s for s in everything)  # sanity
    assert not [s for s in everything if key in s]
    for entry in world.run(world.db.audit.newest(1000)):
        assert key not in repr(entry)


def _settled(world: World) -> None:
    """Until the refusals of known clients are written (after their answers)."""
    world.run(world.container.auth().failures.settled())


def _stored(world: World) -> tuple[Any, Any]:
    """The api clients and the audit log as stored now."""
    _settled(world)
    return world.run(world.db.clients.all()), world.run(world.db.audit.newest(1000))


def _listed(world: World) -> Any:
    """The api client as the operator lists it (`walletcore clients list`)."""
    party = world.parties["the api client"]
    _settled(world)
    clients = world.run(world.container.auth().list_clients())
    return next(c for c in clients if c.client_id == party.client_id)


def _auth_entries(world: World) -> list[Any]:
    """The audit log's /auth entries of the api client, oldest first."""
    party = world.parties["the api client"]
    _settled(world)
    entries = world.run(world.db.audit.newest(1000))
    return [e for e in reversed(entries) if e.action == "auth" and e.client_id == party.client_id]


@then(
    parsers.parse(
        "the operator sees {count:d} failed authentications of the api client, "
        "from the first to the last"
    )
)
def failures_listed(world: World, count: int) -> None:
    failures = _listed(world).auth_failures
    times = [at for _, at in world.tokens["refusals"]]
    assert (failures.count, failures.since, failures.last_at) == (count, times[0], times[-1])


@then("the operator sees no failed authentication of the api client since then")
def no_failures_listed(world: World) -> None:
    failures = _listed(world).auth_failures
    assert (failures.count, failures.since) == (0, None)
    assert failures.last_at == world.tokens["refusals"][-1][1]  # the latest one stays known


@then("the audit log holds one refused authentication of the api client, the first of the run")
def one_refusal_audited(world: World) -> None:
    refused = [e for e in _auth_entries(world) if e.outcome == "401"]
    assert len(refused) == 1, refused
    assert refused[0].request_id == world.tokens["auth requests"][0]
    assert refused[0].at == world.tokens["refusals"][0][1]


@then(
    parsers.parse(
        "the audit log records that the authentication ended a run of {count:d} failed ones"
    )
)
def run_end_audited(world: World, count: int) -> None:
    last = _auth_entries(world)[-1]
    since = format_datetime(world.tokens["refusals"][0][1])
    assert (last.outcome, last.request_id) == ("ok", world.tokens["auth requests"][-1])
    assert last.detail == f"ends a run of {count} failed /auth since {since}"


@then("the api clients and the audit log are as they were before")
def nothing_stored(world: World) -> None:
    assert _stored(world) == world.tokens["stored before"]


@then(
    parsers.parse(
        "the audit log records the authentications with their request ids and outcomes "
        '"{first}" and "{second}"'
    )
)
def audit_records(world: World, first: str, second: str) -> None:
    _settled(world)
    entries = [e for e in world.run(world.db.audit.newest(1000)) if e.action == "auth"]
    by_request = {e.request_id: e for e in entries}
    requests = world.tokens["auth requests"]
    assert [by_request[r].outcome for r in requests] == [first, second]
    for entry in entries:
        assert entry.client_id == world.parties["the api client"].client_id
