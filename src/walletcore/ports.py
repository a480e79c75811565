"""The ports: async `typing.Protocol`s the core drives, in domain types only.

Adapters implement them (and may subclass them, so a type checker sees the promise):
`walletcore.sandbox` holds the in-memory ones, the adapter packages the real ones.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol, runtime_checkable

from walletcore.domain.assets import Asset, Chain, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, Side, Trade, TradeStatus
from walletcore.domain.wallet import TxRow, WalletOwner, WalletRecord

#: The audit entries a state-changing Repo method writes in the change's own transaction.
AuditEntries = Sequence[AuditEntry]

#: symbol -> price fiat -> price. Floats appear here and nowhere else (the `/prices` map).
PriceMap = Mapping[str, Mapping[str, float]]


class Clock(Protocol):
    """Injected time, so lapsed quotes and token expiry are testable without sleeps."""

    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


@runtime_checkable
class Lifecycle(Protocol):
    """Optional: adapters with background work or connections implement it."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


class PriceSource(Protocol):
    """Indicative fiat prices: the `/prices` map and the unit price a quote is made at."""

    async def price_map(self) -> PriceMap:
        """Last known prices for every symbol in USD, EUR, GBP, CAD; a missing fiat is 0."""
        ...

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        """Price of one whole coin in `fiat`.

        Raises `PriceUnavailable` (502) when there is no usable price, `PricingTimeout` (504)
        when the upstream did not answer in time.
        """
        ...


class TradeVenue(Protocol):
    """Where approved orders execute. The order's fixed leg is held; the other leg moves."""

    async def execute(self, order: Order) -> Fill | Accepted:
        """Price the order again and execute it.

        Returns a `Fill` (settled) or `Accepted` (taken, being worked). Raises
        `OrderRejected` (nothing traded), `PriceUnavailable` (nothing placed, safe to retry)
        or `VenueTimeout` / `PricingTimeout` (outcome unknown).
        """
        ...

    async def status(self, order: Order) -> OrderOutcome:
        """What became of an order placed earlier, found by its trade id."""
        ...


@dataclass(frozen=True, slots=True)
class NewWallet:
    """A freshly created wallet. `mnemonic` is shown once (user wallets) and never kept."""

    sealed: bytes = field(repr=False)
    addresses: Mapping[Chain, str]
    mnemonic: str | None = field(default=None, repr=False)


class ChainSigner(Protocol):
    """One chain's private key, alive only inside one `KeyStore.unseal` block.

    It never shows the key itself: its repr names the chain and address only, and after the
    block it is wiped and refuses to sign.
    """

    chain: Chain
    #: The address of the key on `chain`; compare it with the stored one before signing.
    address: str

    def sign(self, payload: bytes) -> bytes:
        """Sign `payload`.

        - BITCOIN, ETHEREUM, BSC, POLYGON, TRON: `payload` is a 32-byte digest (sighash,
          transaction hash); the answer is 65 bytes `r || s || recovery id`, low-S.
        - SOLANA: `payload` is the message; the answer is the 64-byte ed25519 signature.
        """
        ...


class KeyStore(Protocol):
    """Creates wallets from fresh entropy and keeps their seeds sealed.

    User wallets are sealed under the wallet password; platform wallets under the operator
    secret (pass `password=None` to open them). A wrong password raises
    `WrongWalletPassword` before anything else happens, after the full key-derivation time.
    Adapters bound the number of unseals running at once.
    """

    async def create_wallet(self, password: str, chains: Collection[Chain]) -> NewWallet:
        """A new user wallet: mnemonic (shown once), addresses for `chains`, sealed seed."""
        ...

    async def create_platform_wallet(self, chains: Collection[Chain]) -> NewWallet:
        """A new platform wallet, sealed under the operator secret; `mnemonic` is None."""
        ...

    async def derive_addresses(
        self, sealed: bytes, password: str | None, chains: Collection[Chain]
    ) -> Mapping[Chain, str]:
        """Unseal (password for a user wallet, None for a platform wallet) and derive.

        The password is checked even when `chains` is empty.
        """
        ...

    def unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AbstractAsyncContextManager[ChainSigner]:
        """`async with keystore.unseal(sealed, password, chain) as signer:` the chain's key
        for the length of the block, wiped when it ends. The password is checked on entry."""
        ...


@dataclass(frozen=True, slots=True)
class FeeQuote:
    """A fee in the chain's native base units; TRON adds bandwidth and energy."""

    native_units: int
    bandwidth: int | None = None
    energy: int | None = None


#: `validate(chain, address)` -> the normalised address, or `InvalidRequest` saying why.
AddressValidator = Callable[[Chain, str], str]
#: `verify(chain, address, payload, signature)` -> whether the key of `address` signed it.
SignatureVerifier = Callable[[Chain, str, bytes, bytes], bool]


@dataclass(frozen=True, slots=True)
class Transfer:
    """A transfer to build. `amount_units` is what the recipient receives; `fee_payer` is the
    address whose native coin pays the network fee (the sender, or a sponsor)."""

    asset: Asset
    sender: str
    recipient: str
    amount_units: int
    fee_payer: str

    @property
    def signers(self) -> tuple[str, ...]:
        """Who must sign: the sender, and the fee payer when it is someone else."""
        if self.fee_payer == self.sender:
            return (self.sender,)
        return (self.fee_payer, self.sender)


@dataclass(frozen=True, slots=True)
class UnsignedTransfer:
    """A built transfer awaiting its signatures.

    `payload` is what every signer signs (see `ChainSigner.sign`: a 32-byte digest on the
    secp256k1 chains, the message on SOLANA); `body` is the gateway's own encoding.
    """

    transfer: Transfer
    fee: FeeQuote
    payload: bytes
    body: bytes
    #: Per-signer payloads, when signers sign different things (an EVM sponsor signs its
    #: gas top-up, the sender its transfer); None: everyone signs `payload`.
    payloads: Mapping[str, bytes] | None = None

    def payload_for(self, signer: str) -> bytes:
        """What `signer` signs."""
        if self.payloads is None:
            return self.payload
        return self.payloads[signer]


@dataclass(frozen=True, slots=True)
class SignedTransfer:
    """A transfer ready to broadcast: the bytes the network takes and its hash."""

    raw: bytes = field(repr=False)
    tx_hash: str


class ChainGateway(Protocol):
    """One chain: addresses, balances, history, lookups, fees, and transfers.

    A transfer is built (`prepare`), signed by the core with keys from the `KeyStore` (never
    the gateway's own), put together (`assemble`) and broadcast. Broadcasting the same
    signed bytes again is harmless: the network knows them and answers the same hash.
    """

    chain: Chain

    def validate_address(self, address: object) -> str:
        """The address in its normalised form, or `InvalidRequest` saying what is wrong
        (checksum, network, encoding)."""
        ...

    async def balance(self, address: str, asset: Asset) -> int:
        """Base units held. BITCOIN may raise `AddressUnknown` (no transactions yet)."""
        ...

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        """Newest first, at most `limit`; `HistoryUnavailable` when it cannot be read now."""
        ...

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        """One transaction of this wallet and asset, or `TransactionNotFound`."""
        ...

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        """The fee of that transfer now (`fee_payer`: a sponsor, when not the sender)."""
        ...

    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        """Build `transfer`, paying `fee` (a quote of `fee()`), for signing."""
        ...

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        """The signed transaction, from one signature per `transfer.signers` address."""
        ...

    async def broadcast(self, signed: SignedTransfer) -> str:
        """Send it; the transaction hash. Already known to the network counts as sent.

        Raises `TransferRejected` or `InsufficientFunds` when the network refused it (nothing
        was sent), `ServiceUnavailable` when the node could not be reached (nothing was sent;
        the same bytes may be broadcast again) and `BroadcastTimeout` when the outcome is
        unknown.
        """
        ...

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """`unsigned` will never be broadcast (signing or storing it failed): give back what
        `prepare` reserved for it (an EVM nonce), so later transfers do not wait on it."""
        ...


class NonceLease(Protocol):
    """The turn of one address of one chain to take a nonce, held across processes.

    Only one lease of a (chain, address) exists at a time in the whole deployment (every
    process on one database); the next `acquire` waits until this one is released, or
    until the process holding it dies.
    """

    #: The next nonce this deployment has seen accepted from the address (0: none yet).
    floor: int

    async def release(self, advanced_to: int | None) -> None:
        """Give the turn up. `advanced_to`: the new floor, when a transaction took a nonce
        (the stored floor only ever rises); None when nothing was sent. Idempotent."""
        ...

    async def reset(self, next_nonce: int) -> None:
        """The operator's repair (`walletcore nonces reset`): store `next_nonce` as the floor,
        lower or higher, while this lease is held; `floor` follows. A transaction the node
        dropped after accepting it leaves the floor past a nonce that never lands."""
        ...


class NonceLeases(Protocol):
    """Cross-process nonce reservation (docs/chains.md, "Nonces"), exposed by the Repo."""

    async def acquire(self, chain: str, address: str) -> NonceLease:
        """Wait for the lease of `address` on `chain` (a nonce sequence: `eip155:<chain
        id>` for the EVM chains) and return it with the stored floor.

        Raises `AddressBusy` (503) when another holder keeps it too long, and the store's
        own errors (`StorageUnavailable`) when it cannot be reached.
        """
        ...


class Repo(Protocol):
    """Storage of api clients, users and wallets, trades, sends and the audit log, and the
    nonce leases of the processes sharing it.

    Every method is atomic. State changes that must not race go through `swap_trade`, a
    compare-and-set on the trade's status, and `begin_send` / `advance_send`, the
    idempotency record of a send.

    The audit log is written with the change it records: every state-changing method takes
    `audit`, the entries to append in the same transaction, written if and only if the
    change is applied (a compare-and-set that loses, an add that finds the record there, or
    a change that fails writes none of them; an entry that cannot be written fails the
    change). The log is append-only and in commit order, so it can serve as an outbox.
    `append_audit` is for entries that record no change (a refusal, a replay).
    """

    # api clients
    async def add_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        """Store a new api client; `InvalidRequest` if its id is taken (nothing written)."""
        ...

    async def get_client(self, client_id: str) -> ApiClient | None: ...

    async def list_clients(self) -> list[ApiClient]: ...

    async def update_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None: ...

    # users and wallets
    async def add_user_wallet(
        self,
        user: User,
        wallet: WalletRecord,
        *,
        request_id: str | None = None,
        audit: AuditEntries = (),
    ) -> bool:
        """Store a new user and its wallet together.

        `request_id`: the caller's X-Request-Id, kept per api client: when a user was
        already created under it, nothing is stored and the answer is False (the user of
        that request is `created_by_request`). True when stored.
        """
        ...

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        """The id of the user `add_user_wallet` stored under this client's `request_id`."""
        ...

    async def get_user(self, client_id: str, user_id: str) -> User | None: ...

    async def add_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> bool:
        """Store a wallet unless its owner has one; False when one was there already."""
        ...

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None: ...

    async def update_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> None: ...

    # trades
    async def add_trade(self, trade: Trade, *, audit: AuditEntries = ()) -> None: ...

    async def get_trade(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        """The trade, only if it belongs to this user of this client."""
        ...

    async def list_trades(
        self,
        client_id: str,
        user_id: str,
        *,
        side: Side | None,
        status: TradeStatus | None,
        limit: int,
    ) -> list[Trade]:
        """Newest first (by creation), at most `limit`."""
        ...

    async def swap_trade(
        self, expected: TradeStatus, trade: Trade, *, audit: AuditEntries = ()
    ) -> bool:
        """Replace the stored trade with `trade` if its status is still `expected`.

        A loser (False) writes nothing and costs one conditional write, never a wait for
        the winner's whole use case.
        """
        ...

    async def expire_lapsed(
        self, client_id: str, user_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> int:
        """Move this user's open trades whose quote lapsed by `now` to `expired`; how many.

        `audit`: written once per trade moved, its `target` set to the trade id. Finding
        nothing to expire (the usual case) is a read: no write transaction.
        """
        ...

    # sends: the idempotency record, one per (api client, X-Request-Id)
    async def begin_send(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
        audit: AuditEntries = (),
    ) -> SendRecord:
        """The record this request works with, atomically.

        None stored: a new `started` record leased to the caller. Stored: `SendRecord.claim`
        decides - finished is returned to replay its result, a live lease is
        `IdempotencyConflict` (409), a lapsed one is taken over (next `attempt`) to resume,
        another fingerprint is `IdempotencyKeyReused` (422).

        `audit` is written when a record is stored (created or taken over), not when a
        finished one is returned.
        """
        ...

    async def advance_send(
        self, current: SendRecord, new: SendRecord, *, audit: AuditEntries = ()
    ) -> bool:
        """Store `new` if the stored record still has `current`'s state and attempt.

        False means another request took the record over: stop, do not broadcast.
        """
        ...

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None: ...

    # audit
    async def append_audit(self, entry: AuditEntry) -> None:
        """Append one entry on its own (it records no change of stored state)."""
        ...

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""
        ...

    # nonces
    def nonce_leases(self) -> NonceLeases:
        """The nonce reservation shared by every process using this store."""
        ...
