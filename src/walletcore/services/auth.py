"""Auth: api clients (key kept only as SHA-256), 15-minute Ed25519 tokens, the operator's
client management.

Rules:
- `/auth` answers `401 Invalid credentials` for an unknown client, a wrong key or a disabled
  client, alike and in the same time: one read of the client by id, one hash compared, and
  no write waited for (a known client's refusal is written after the answer).
- A refused `/auth` writes no row of its own: unauthenticated traffic must not grow the
  database. A missing or malformed client id or api key, or an unknown id, stores nothing;
  a known client's refusals are added up on it in place (`ApiClient.auth_failures`,
  `walletcore.services.auth_failures`), and only the first of a run (since the client's
  last successful `/auth`) is audited `401`. Every refusal is told to
  `Observer.auth_failure` with its reason, never the id. A successful `/auth` is audited
  `ok`, with the run of failures it ends (count and first failure) in `detail`.
- A token lasts 15 minutes; an absent, malformed, forged or lapsed token, or one issued
  before the client's key was rotated or the client disabled, is `401 Missing or expired token`.
- Checking a token reads the api client at most once per `client_cache_seconds` (default
  1 s) per process, not once per request. So a disable or a rotation stops the client's
  tokens at once in the process that made it, and within that bound in every other process
  (another worker, a server after `walletcore clients disable`). `/auth` always reads the
  client fresh: a rotated key never opens a new token.
- The operator's changes of a client (create, update, disable, enable, rotate) are audited
  with the change; a change that changes nothing is audited `replay`. An update or an
  enable reaches the other processes within the same `client_cache_seconds`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import NoReturn

from walletcore.domain.assets import CONTRACT_ASSETS, FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.clients import ApiClient, AuthFailures
from walletcore.domain.errors import (
    ApiClientNotFound,
    InvalidCredentials,
    InvalidRequest,
    MissingOrExpiredToken,
)
from walletcore.domain.ids import is_id, new_id
from walletcore.domain.times import format_optional_datetime, utc
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, Observer, Storage
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.auth_failures import AuthFailureTally
from walletcore.services.tokens import TokenClaims, TokenSigner

TOKEN_LIFETIME = timedelta(minutes=15)
#: Api clients a process keeps for token checks (the oldest goes first beyond it).
CLIENT_CACHE_SIZE = 4096
API_KEY_PREFIX = "wck_"
_DUMMY_HASH = hashlib.sha256(b"walletcore: no such client").hexdigest()
#: A client's assets when the operator names none: the contract's sixteen.
_CONTRACT_IDS = frozenset(a.id for a in CONTRACT_ASSETS)


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str = field(repr=False)
    expires_at: datetime

    def __repr__(self) -> str:
        return f"IssuedToken(token=<hidden>, expires_at={self.expires_at!r})"


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A client and its api key, shown once to the operator."""

    client: ApiClient
    api_key: str = field(repr=False)


class AuthService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        signer: TokenSigner,
        auditor: Auditor,
        *,
        catalog: Catalog,
        client_cache_seconds: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        observer: Observer | None = None,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._signer = signer
        self._auditor = auditor
        #: the served assets: what a client may be enabled for
        self._catalog = catalog
        #: told every refused `/auth` (the HTTP binding hooks its metrics here)
        self.observer = observer or Observer()
        #: known clients' refusals, written after the answer
        self.failures = AuthFailureTally(storage, auditor)
        self._cache_seconds = max(0.0, float(client_cache_seconds))
        self._monotonic = monotonic
        #: client id -> (read at, by `monotonic`; the client as read, None when unknown)
        self._cache: dict[str, tuple[float, ApiClient | None]] = {}
        #: Bumped by every change of a client here: a read begun before it is not kept.
        self._changes = 0

    # -- /auth ------------------------------------------------------------------------
    async def authenticate(
        self, client_id: JsonValue, api_key: JsonValue, request_id: str
    ) -> IssuedToken:
        if not isinstance(client_id, str) or not is_id(client_id) or not isinstance(api_key, str):
            self.observer.auth_failure("malformed")
            raise InvalidCredentials()
        client = await self._client(client_id)
        presented = hash_api_key(api_key)
        expected = client.key_hash if client is not None else _DUMMY_HASH
        # Compare even when the client is unknown, so timing tells nothing.
        matches = hmac.compare_digest(presented, expected)
        if client is None or client.disabled or not matches:
            self._refuse(client_id, request_id, _refusal(client, matches))
        async with self._auditor.record("auth", request_id, client_id, mutating=False) as note:
            waiting = self.failures.take(client_id)  # refusals not written yet
            if client.auth_failures.count or waiting is not None:
                await self._end_failures(client_id, note, waiting)
            now = utc(self._clock.now()).replace(microsecond=0)
            claims = TokenClaims(client.client_id, client.key_generation, now, now + TOKEN_LIFETIME)
            return IssuedToken(self._signer.sign(claims), claims.expires_at)

    def _refuse(self, client_id: str, request_id: str, reason: str) -> NoReturn:
        """Count the refusal (module rules) and raise the 401: a known client's is tallied
        for a write after the answer (`AuthFailureTally`), an unknown id's is not stored."""
        self.observer.auth_failure(reason)
        if reason != "unknown_client":
            self.failures.add(client_id, self._clock.now(), request_id, reason)
        raise InvalidCredentials()

    async def _end_failures(
        self, client_id: str, note: AuditNote, waiting: tuple[AuthFailures, AuditEntry] | None
    ) -> None:
        """A success ends the client's run of failures (with the refusals still `waiting`
        for the writer); its `ok` entry, written with that change, tells how long the run
        was."""
        carried: list[AuditEntry] = []
        async with self._storage.write() as unit:
            if waiting is not None:
                failures, began = waiting
                if await unit.clients.add_auth_failures(client_id, failures, entry=began):
                    carried.append(began)
            ended = await unit.clients.auth_succeeded(client_id)
            detail = None
            if ended.count:
                since = format_optional_datetime(ended.since)
                detail = f"ends a run of {ended.count} failed /auth since {since}"
            entry = note.entry(detail=detail)
            await unit.audit.append(entry)
        note.carried(*carried, entry)

    # -- every other endpoint ---------------------------------------------------------
    async def verify(self, authorization: str | None) -> ApiClient:
        """The api client behind an `Authorization: Bearer` header value, or a 401."""
        if not authorization:
            raise MissingOrExpiredToken()
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise MissingOrExpiredToken()
        claims = self._signer.verify(token.strip())
        if claims is None or utc(self._clock.now()) >= claims.expires_at:
            raise MissingOrExpiredToken()
        client = await self._checked_client(claims.client_id)
        if client is None or client.disabled:
            raise MissingOrExpiredToken()
        if not hmac.compare_digest(str(client.key_generation), str(claims.generation)):
            raise MissingOrExpiredToken()
        return client

    # -- operator ---------------------------------------------------------------------
    async def create_client(
        self,
        name: str,
        assets: Iterable[int] | None = None,
        fee_payer: FeePayer = FeePayer.USER,
        asset_fee_payers: Mapping[int, FeePayer] | None = None,
        request_id: str = "operator",
    ) -> IssuedKey:
        name = _check_name(name)
        enabled = _check_assets(self._catalog, assets)
        api_key = new_api_key()
        client = ApiClient(
            client_id=new_id(),
            name=name,
            key_hash=hash_api_key(api_key),
            enabled_assets=enabled,
            fee_payer=fee_payer,
            asset_fee_payers=dict(asset_fee_payers or {}),
            created_at=self._clock.now(),
        )
        async with self._auditor.record("client.create", request_id, client.client_id) as note:
            entry = note.entry()
            async with self._storage.write() as unit:
                await unit.clients.add(client)
                await unit.audit.append(entry)
            note.carried(entry)
        return IssuedKey(client, api_key)

    async def list_clients(self) -> list[ApiClient]:
        async with self._storage.read() as unit:
            return await unit.clients.all()

    async def disable_client(self, client_id: str, request_id: str = "operator") -> ApiClient:
        async with self._auditor.record("client.disable", request_id, _audit_id(client_id)) as note:
            return await self._change(
                client_id,
                note,
                lambda c: replace(c, disabled=True, key_generation=c.key_generation + 1),
            )

    async def enable_client(self, client_id: str, request_id: str = "operator") -> ApiClient:
        """The reverse of `disable_client`: `/auth` opens tokens again.

        Rules:
        - tokens issued before the disable stay refused (the disable moved the key
          generation on); new ones work, here at once, elsewhere within
          `client_cache_seconds`;
        - enabling an enabled client changes nothing (audited `replay`).
        """
        async with self._auditor.record("client.enable", request_id, _audit_id(client_id)) as note:
            return await self._change(client_id, note, lambda c: replace(c, disabled=False))

    async def update_client(
        self,
        client_id: str,
        *,
        name: str | None = None,
        assets: Iterable[int] | None = None,
        fee_payer: FeePayer | None = None,
        asset_fee_payers: Mapping[int, FeePayer] | None = None,
        request_id: str = "operator",
    ) -> ApiClient:
        """Change the client's name, enabled assets and fee payers (what `/config` shows).

        Rules:
        - only what is given changes; `None` keeps the stored value;
        - `assets` replaces the enabled assets: known ids, at least one (`400` otherwise);
        - `asset_fee_payers` are per-asset exceptions to `fee_payer`, merged over the
          stored ones; each names a known, enabled asset (`400` otherwise). An exception
          equal to the client's fee payer is dropped (so `ID=<fee payer>` removes one), and
          so is the exception of an asset no longer enabled;
        - the key, its generation and `disabled` stay: issued tokens keep working and see
          the change at once here, within `client_cache_seconds` elsewhere;
        - a refusal changes nothing; an update that changes nothing is audited `replay`.
        """
        exceptions = dict(asset_fee_payers or {})
        async with self._auditor.record("client.update", request_id, _audit_id(client_id)) as note:
            new_name = None if name is None else _check_name(name)
            enabled = None if assets is None else _check_assets(self._catalog, assets)
            unknown = sorted(a for a in exceptions if a not in self._catalog)
            if unknown:
                raise InvalidRequest(f"unknown asset ids: {unknown}")

            def change(client: ApiClient) -> ApiClient:
                now_enabled = client.enabled_assets if enabled is None else enabled
                not_enabled = sorted(set(exceptions) - set(now_enabled))
                if not_enabled:
                    raise InvalidRequest(
                        f"fee payer for assets the client is not enabled for: {not_enabled}"
                    )
                payer = client.fee_payer if fee_payer is None else fee_payer
                merged = {**client.asset_fee_payers, **exceptions}
                return replace(
                    client,
                    name=client.name if new_name is None else new_name,
                    enabled_assets=now_enabled,
                    fee_payer=payer,
                    asset_fee_payers={
                        a: merged[a] for a in now_enabled if a in merged and merged[a] != payer
                    },
                )

            return await self._change(client_id, note, change, detail=_describe)

    async def rotate_key(self, client_id: str, request_id: str = "operator") -> IssuedKey:
        """Re-issue the api key: the old key and every token issued under it stop working."""
        async with self._auditor.record("client.rotate", request_id, _audit_id(client_id)) as note:
            api_key = new_api_key()
            updated = await self._change(
                client_id,
                note,
                lambda c: replace(
                    c, key_hash=hash_api_key(api_key), key_generation=c.key_generation + 1
                ),
            )
            return IssuedKey(updated, api_key)

    async def _change(
        self,
        client_id: str,
        note: AuditNote,
        change: Callable[[ApiClient], ApiClient],
        *,
        detail: Callable[[ApiClient], str] | None = None,
    ) -> ApiClient:
        """Read, change and store the client with its entry, in one write unit (the entry
        holds ids, the action and `detail` of the changed client, never the key). A change
        that leaves the client as it was writes nothing (the note records `replay`)."""
        if not is_id(client_id):
            raise ApiClientNotFound()
        async with self._storage.write() as unit:
            client = await unit.clients.get(client_id)
            if client is None:
                raise ApiClientNotFound()
            updated = change(client)
            if updated == client:
                return client
            entry = note.entry(detail=None if detail is None else detail(updated))
            await unit.clients.update(updated)
            await unit.audit.append(entry)
        note.carried(entry)
        self._changes += 1
        self._cache.pop(client_id, None)  # this process: at once
        return updated

    async def _client(self, client_id: str) -> ApiClient | None:
        async with self._storage.read() as unit:
            return await unit.clients.get(client_id)

    async def _checked_client(self, client_id: str) -> ApiClient | None:
        """The client behind a valid token's id: read at most once per cache period. Only
        ids of tokens this service signed get here, so the cache holds real ids."""
        if self._cache_seconds <= 0:
            return await self._client(client_id)
        now = self._monotonic()
        cached = self._cache.get(client_id)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        changes = self._changes
        client = await self._client(client_id)
        if changes != self._changes:  # a change here raced this read: use it, keep none
            return client
        if len(self._cache) >= CLIENT_CACHE_SIZE and client_id not in self._cache:
            self._cache.pop(next(iter(self._cache)))
        self._cache[client_id] = (now, client)
        return client


def _refusal(client: ApiClient | None, matches: bool) -> str:
    """The reason of a refusal (`walletcore.ports.metrics.AUTH_FAILURE_REASONS`)."""
    if client is None:
        return "unknown_client"
    return "wrong_key" if not matches else "disabled"


def _audit_id(client_id: str) -> str | None:
    """Only a well-formed id reaches the audit log; anything else an operator typed does not."""
    return client_id if is_id(client_id) else None


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidRequest("name must be 1 to 100 characters")
    return name


def _describe(client: ApiClient) -> str:
    """What an update leaves, for its audit entry: ids and enums, never the key."""
    exceptions = ",".join(f"{a}={p.value}" for a, p in sorted(client.asset_fee_payers.items()))
    assets = ",".join(str(a) for a in client.enabled_assets)
    return f"assets={assets} feePayer={client.fee_payer.value} assetFeePayers={exceptions}"


def _check_assets(catalog: Catalog, assets: Iterable[int] | None) -> tuple[int, ...]:
    """The assets to enable, in catalog order, each one the catalog serves. None given:
    the contract's sixteen (`CONTRACT_ASSETS`), never a plugin chain's: a chain the
    deployment adds is enabled for a client only when the operator names its assets, so
    serving a new chain changes no existing client's answers."""
    if assets is None:
        return tuple(a for a in catalog.asset_ids if a in _CONTRACT_IDS)
    wanted = set(assets)
    unknown = sorted(a for a in wanted if a not in catalog)
    if unknown:
        raise InvalidRequest(f"unknown asset ids: {unknown}")
    if not wanted:
        raise InvalidRequest("enable at least one asset")
    return tuple(a for a in catalog.asset_ids if a in wanted)
