"""Wallets: create (seed phrase shown once), extend, addresses, and the platform wallet.

Rules:
- `/create` makes a user (24-hex id) and its wallet together. The 24-word seed phrase is
  returned this once; it is never stored, logged or audited.
- A `/create` repeating an X-Request-Id the caller sent (per api client) makes no second
  wallet: it is `409` naming the user the first one created ("... its seed phrase is
  shown only once"), so a client that lost the first answer learns its user id, and
  never mistakes the answer for a new wallet with a seed phrase. Without an X-Request-Id
  every `/create` makes a wallet.
- A wallet password is a string of 8 to 256 characters (after Unicode NFC normalisation).
  It cannot be changed or recovered. Opening a wallet (`/extend`, `/send`) checks only that
  the password is a non-empty string of at most 256 characters: the length rule applies
  when it is chosen, and any other string is simply the wrong password.
- Address maps cover only chains with at least one asset enabled for the api client, in
  catalog order. `/extend` derives the chains enabled since creation; it needs the password.
- A wrong password: `401 Invalid credentials` on `/extend`, and changes nothing. On `/send`
  the answer depends on the chain (`password_error_for`).
- A user of another api client, or none, is `404`. A platform wallet exists once the
  operator provisions it (idempotent); before that the platform endpoints answer `404`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from walletcore.domain.assets import Chain
from walletcore.domain.chains import ChainDescription
from walletcore.domain.clients import User
from walletcore.domain.errors import (
    ApiClientNotFound,
    Conflict,
    DomainError,
    InvalidCredentials,
    InvalidRequest,
    WrongWalletPassword,
)
from walletcore.domain.ids import is_id, new_id, parse_id
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, KeyStore, Storage, UnitOfWork
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.context import Caller
from walletcore.services.wallet_access import platform_wallet, user_wallet

PASSWORD_MIN_LENGTH = 8
PASSWORD_MAX_LENGTH = 256


@dataclass(frozen=True, slots=True)
class CreatedWallet:
    """The answer to `/create`. `mnemonic` is shown this once; its repr stays hidden."""

    user_id: str
    addresses: Mapping[Chain, str]
    mnemonic: str = field(repr=False)


class WalletAlreadyCreated(Conflict):
    """`/create` again under an X-Request-Id that already created a user: nothing is made."""

    def __init__(self, user_id: str) -> None:
        super().__init__(
            f"A wallet was already created for this X-Request-Id (userId {user_id}); "
            "its seed phrase is shown only once"
        )
        self.user_id = user_id


def password_error_for(description: ChainDescription) -> DomainError:
    """The spec's answer to a wrong wallet password when sending on the described chain:
    its description's `wrong_password` (the contract's chains: EVM chains and TRON
    `401 Invalid credentials`; SOLANA `401 Invalid password`; BITCOIN `400 Invalid
    password`)."""
    return description.wrong_password.error()


def new_password(value: JsonValue) -> str:
    """A password chosen at creation: a string of 8 to 256 characters."""
    password = _password_text(value)
    if not PASSWORD_MIN_LENGTH <= len(password) <= PASSWORD_MAX_LENGTH:
        raise InvalidRequest(
            f"password must be {PASSWORD_MIN_LENGTH} to {PASSWORD_MAX_LENGTH} characters"
        )
    return password


def given_password(value: JsonValue) -> str:
    """A password presented to open a wallet: any non-empty string of at most 256
    characters (a wrong one is a 401 later, not a 400 here)."""
    password = _password_text(value)
    if len(password) > PASSWORD_MAX_LENGTH:
        raise InvalidRequest(f"password must be at most {PASSWORD_MAX_LENGTH} characters")
    return password


def _password_text(value: JsonValue) -> str:
    if value is None or value == "":
        raise InvalidRequest("password is required")
    if not isinstance(value, str):
        raise InvalidRequest("password must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("password must be valid Unicode text") from None
    # The KeyStore hashes the NFC form too, so the length counts what it will hash.
    return unicodedata.normalize("NFC", value)


class WalletService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        keystore: KeyStore,
        policy: AssetPolicy,
        auditor: Auditor,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._keystore = keystore
        self._policy = policy
        self._auditor = auditor

    # -- user wallets -------------------------------------------------------------------
    async def create(self, caller: Caller, *, password: JsonValue) -> CreatedWallet:
        """`/create`: a new user and wallet; the seed phrase is in the answer, once.

        With an X-Request-Id the caller sent, at most one per (api client, X-Request-Id):
        a repeat is `WalletAlreadyCreated` (409), checked before any key is made and again,
        atomically, when the user is stored (two at once: one wallet).
        """
        async with self._auditor.record(
            "wallet.create", caller.request_id, caller.client_id
        ) as note:
            secret = new_password(password)
            key = caller.request_id if caller.request_id_given else None
            if key is not None:
                async with self._storage.read() as unit:
                    await self._refuse_repeat(unit, caller, key, note)
            chains = self._policy.enabled_chains(caller.client)
            created = await self._keystore.create_wallet(secret, chains)
            if not created.mnemonic:
                raise RuntimeError("the keystore returned a user wallet without a seed phrase")
            now = self._clock.now()
            user = User(user_id=new_id(), client_id=caller.client_id, created_at=now)
            wallet = WalletRecord(
                client_id=caller.client_id,
                owner=WalletOwner.USER,
                user_id=user.user_id,
                sealed=created.sealed,
                addresses=dict(created.addresses),
                created_at=now,
            )
            entry = note.entry(user_id=user.user_id)
            async with self._storage.write() as unit:
                if not await unit.wallets.add_user(user, wallet, request_id=key):
                    await self._refuse_repeat(unit, caller, key or "", note)  # lost a race
                    raise RuntimeError("add_user refused a user it does not know of")
                await unit.audit.append(entry)
            note.carried(entry)
            note.user_id = user.user_id
            return CreatedWallet(
                user.user_id, _ordered(created.addresses, chains), created.mnemonic
            )

    async def _refuse_repeat(
        self, unit: UnitOfWork, caller: Caller, request_id: str, note: AuditNote
    ) -> None:
        """409 if this client's `request_id` created a user already."""
        existing = await unit.wallets.created_by_request(caller.client_id, request_id)
        if existing is not None:
            note.user_id = existing
            raise WalletAlreadyCreated(existing)

    async def extend(
        self, caller: Caller, *, user_id: JsonValue, password: JsonValue
    ) -> Mapping[Chain, str]:
        """`/extend`: add addresses for chains enabled since creation; answer the map."""
        uid = parse_id(user_id, "userId")
        async with self._auditor.record(
            "wallet.extend", caller.request_id, caller.client_id, user_id=uid
        ) as note:
            secret = given_password(password)
            wallet = await self._user_wallet(caller, uid)
            chains = self._policy.enabled_chains(caller.client)
            missing = [c for c in chains if c not in wallet.addresses]
            try:
                # Unsealed even when nothing is missing: a wrong password is always a 401.
                derived = await self._keystore.derive_addresses(wallet.sealed, secret, missing)
            except WrongWalletPassword:
                raise InvalidCredentials() from None
            if missing:
                wallet = replace(
                    wallet,
                    addresses={**wallet.addresses, **{c: derived[c] for c in missing}},
                    updated_at=self._clock.now(),
                )
                note.target = ",".join(missing)
                await self._update(wallet, note)
            return _ordered(wallet.addresses, chains)  # nothing missing: audited `replay`

    async def addresses(self, caller: Caller, *, user_id: JsonValue) -> Mapping[Chain, str]:
        """`/addresses`: the stored map, only the chains enabled now."""
        wallet = await self._user_wallet(caller, parse_id(user_id, "userId"))
        return _ordered(wallet.addresses, self._policy.enabled_chains(caller.client))

    # -- platform wallets ---------------------------------------------------------------
    async def provision_platform(
        self, client_id: str, request_id: str = "operator"
    ) -> Mapping[Chain, str]:
        """Operator: give the api client its platform wallet (every chain), once.

        Idempotent: a second call answers the same addresses, deriving only chains the
        wallet lacks (none, unless it predates one).
        """
        async with self._auditor.record(
            "wallet.provision_platform", request_id, client_id if is_id(client_id) else None
        ) as note:
            if not is_id(client_id):
                raise ApiClientNotFound()
            async with self._storage.read() as unit:
                client = await unit.clients.get(client_id)
                wallet = await unit.wallets.get(client_id, WalletOwner.PLATFORM, None)
            if client is None:
                raise ApiClientNotFound()
            note.target = "platform"
            if wallet is None:
                wallet = await self._new_platform_wallet(client_id, note)
            # every served chain, in catalog order: a platform wallet carries them all
            missing = [c for c in self._policy.catalog.chains if c not in wallet.addresses]
            if missing:
                derived = await self._keystore.derive_addresses(wallet.sealed, None, missing)
                wallet = replace(
                    wallet,
                    addresses={**wallet.addresses, **{c: derived[c] for c in missing}},
                    updated_at=self._clock.now(),
                )
                await self._update(wallet, note)
            # Provisioned already, every chain there: audited `replay`.
            return _ordered(wallet.addresses, self._policy.enabled_chains(client))

    async def platform_addresses(self, caller: Caller) -> Mapping[Chain, str]:
        """`/platform/addresses`: the api client's platform wallet, enabled chains only."""
        async with self._storage.read() as unit:
            wallet = await platform_wallet(unit, caller.client_id)
        return _ordered(wallet.addresses, self._policy.enabled_chains(caller.client))

    # -- helpers ------------------------------------------------------------------------
    async def _user_wallet(self, caller: Caller, user_id: str) -> WalletRecord:
        async with self._storage.read() as unit:
            return await user_wallet(unit, caller.client_id, user_id)

    async def _update(self, wallet: WalletRecord, note: AuditNote) -> None:
        entry = note.entry()
        async with self._storage.write() as unit:
            await unit.wallets.update(wallet)
            await unit.audit.append(entry)
        note.carried(entry)

    async def _new_platform_wallet(self, client_id: str, note: AuditNote) -> WalletRecord:
        created = await self._keystore.create_platform_wallet(self._policy.catalog.chains)
        wallet = WalletRecord(
            client_id=client_id,
            owner=WalletOwner.PLATFORM,
            user_id=None,
            sealed=created.sealed,
            addresses=dict(created.addresses),
            created_at=self._clock.now(),
        )
        entry = note.entry(detail="created")
        async with self._storage.write() as unit:
            if await unit.wallets.add(wallet):
                await unit.audit.append(entry)
                existing = None
            else:
                # Another provisioning won the race: theirs is the wallet; ours was never shown.
                existing = await unit.wallets.get(client_id, WalletOwner.PLATFORM, None)
                if existing is None:  # pragma: no cover - add said one was there
                    raise RuntimeError("platform wallet vanished while provisioning")
        if existing is not None:
            return existing
        note.carried(entry)
        return wallet


def _ordered(addresses: Mapping[Chain, str], chains: Iterable[Chain]) -> dict[Chain, str]:
    """The addresses of `chains` (enabled, in catalog order) that the wallet has."""
    return {c: addresses[c] for c in chains if c in addresses}
