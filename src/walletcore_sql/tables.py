"""The tables (SQLAlchemy Core). Domain classes stay free of the ORM: `rows.py` maps them.

Migrations (`migrations/versions`) create exactly this; a test compares the two.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from walletcore_sql.types import Money, Units, UTCDateTime, current_tx

#: Constraint names are fixed, so migrations can name what they alter.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)

ID = 64  # ids are 24 hex; room for operator-chosen client ids
#: A BIGINT surrogate key that is SQLite's rowid there (only INTEGER PRIMARY KEY is).
BigId = BigInteger().with_variant(Integer(), "sqlite")

api_clients = Table(
    "api_clients",
    metadata,
    Column("client_id", String(ID), primary_key=True),
    Column("name", Text, nullable=False),
    Column("key_hash", String(128), nullable=False),  # SHA-256 hex of the api key, never the key
    Column("enabled_assets", JSON, nullable=False),  # [int, ...] in catalog order
    Column("fee_payer", String(16), nullable=False),
    Column("asset_fee_payers", JSON, nullable=False),  # {"21": "PLATFORM", ...}
    Column("disabled", Boolean(create_constraint=False), nullable=False),
    Column("key_generation", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=True),
    # Failed /auth of the client, counted in place (`ClientStore.add_auth_failures`): the run
    # since its last successful /auth, the run's first failure, the latest failure ever.
    # A flood of wrong keys changes these, never adds a row.
    Column("auth_failures", Integer, nullable=False, server_default=text("0")),
    Column("auth_failures_since", UTCDateTime, nullable=True),
    Column("auth_failed_at", UTCDateTime, nullable=True),
)

users = Table(
    "users",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("user_id", String(ID), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    # The X-Request-Id of the /create that made the user, when the caller sent one: one
    # user per (client, X-Request-Id), so a repeated /create makes no second wallet.
    Column("request_id", String(255), nullable=True),
    Index(
        "uq_users_request",
        "client_id",
        "request_id",
        unique=True,
        postgresql_where=text("request_id IS NOT NULL"),
        sqlite_where=text("request_id IS NOT NULL"),
    ),
)

wallets = Table(
    "wallets",
    metadata,
    Column("wallet_id", BigId, primary_key=True, autoincrement=True),
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), nullable=False),
    Column("owner", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null for the client's platform wallet
    Column("sealed", LargeBinary, nullable=False),  # the KeyStore's ciphertext
    Column("addresses", JSON, nullable=False),  # {"ETHEREUM": "0x...", ...}
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=True),
    # A user wallet belongs to a stored user; a platform wallet (user_id null) to none.
    ForeignKeyConstraint(["client_id", "user_id"], ["users.client_id", "users.user_id"]),
    CheckConstraint("owner IN ('user', 'platform')", name="owner"),
    CheckConstraint("(owner = 'user') = (user_id IS NOT NULL)", name="owner_user"),
    # One wallet per user, one platform wallet per client.
    Index(
        "uq_wallets_user",
        "client_id",
        "user_id",
        unique=True,
        postgresql_where=text("owner = 'user'"),
        sqlite_where=text("owner = 'user'"),
    ),
    Index(
        "uq_wallets_platform",
        "client_id",
        unique=True,
        postgresql_where=text("owner = 'platform'"),
        sqlite_where=text("owner = 'platform'"),
    ),
)

TRADE_STATUSES = "('open', 'approved', 'executing', 'completed', 'failed', 'expired', 'cancelled')"

trades = Table(
    "trades",
    metadata,
    Column("trade_id", String(ID), primary_key=True),
    Column("client_id", String(ID), nullable=False),
    Column("user_id", String(ID), nullable=False),
    Column("side", String(8), nullable=False),
    Column("status", String(16), nullable=False),
    Column("asset_id", Integer, nullable=False),
    Column("symbol", String(16), nullable=False),
    Column("fiat", String(8), nullable=False),
    Column("fixed_leg", String(8), nullable=False),
    # the quote, as given; never changed after
    Column("quote_crypto_amount", Money, nullable=True),
    Column("quote_fiat_amount", Money, nullable=True),
    Column("quote_price", Money, nullable=False),
    Column("quote_expires_at", UTCDateTime, nullable=False),
    # figures confirmed at approval, and executed ones (price null: none)
    Column("approved_crypto_amount", Money, nullable=True),
    Column("approved_fiat_amount", Money, nullable=True),
    Column("approved_price", Money, nullable=True),
    Column("executed_crypto_amount", Money, nullable=True),
    Column("executed_fiat_amount", Money, nullable=True),
    Column("executed_price", Money, nullable=True),
    Column("reference", Text, nullable=True),
    Column("failure_reason", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("approved_at", UTCDateTime, nullable=True),
    Column("completed_at", UTCDateTime, nullable=True),
    ForeignKeyConstraint(["client_id", "user_id"], ["users.client_id", "users.user_id"]),
    CheckConstraint("side IN ('buy', 'sell')", name="side"),
    CheckConstraint(f"status IN {TRADE_STATUSES}", name="status"),
    CheckConstraint("fixed_leg IN ('crypto', 'fiat')", name="fixed_leg"),
    # expire_lapsed: a user's open quotes only (small: quotes lapse within minutes).
    Index(
        "ix_trades_open_expiry",
        "client_id",
        "user_id",
        "quote_expires_at",
        postgresql_where=text("status = 'open'"),
        sqlite_where=text("status = 'open'"),
    ),
)

# /trades: one user's trades newest first, optionally by side and status.
Index(
    "ix_trades_user_created",
    trades.c.client_id,
    trades.c.user_id,
    trades.c.created_at.desc(),
    trades.c.trade_id.desc(),
)
Index(
    "ix_trades_user_side_status_created",
    trades.c.client_id,
    trades.c.user_id,
    trades.c.side,
    trades.c.status,
    trades.c.created_at.desc(),
    trades.c.trade_id.desc(),
)

# The settlement job (`trades.in_flight`): approved and executing trades of every client,
# oldest first. Partial: in flight is a handful of rows however many trades there are.
Index(
    "ix_trades_in_flight",
    trades.c.created_at,
    trades.c.trade_id,
    postgresql_where=text("status IN ('approved', 'executing')"),
    sqlite_where=text("status IN ('approved', 'executing')"),
)

SEND_STATES = "('started', 'signed', 'broadcast', 'finished')"
#: A followed send is finished, was checked, and has its final instant once final.
SEND_CHAIN_CHECK = (
    "chain_status IS NULL OR (chain_status IN ('pending', 'stuck', 'dropped', 'success', "
    "'failed') AND state = 'finished' AND chain_checked_at IS NOT NULL "
    "AND (chain_status IN ('pending', 'stuck', 'dropped')) = (chain_final_at IS NULL))"
)
#: A followed send not final yet: what the follow job reads (`ix_sends_following`).
SEND_FOLLOWED = "chain_status IN ('pending', 'stuck', 'dropped')"
#: A user's send whose spend is in flight: signed and not finished, or followed and not
#: final (`ix_sends_spending`).
SEND_SPENDING = (
    "spend_user_id IS NOT NULL AND (state IN ('signed', 'broadcast') "
    "OR chain_status IN ('pending', 'stuck', 'dropped'))"
)

sends = Table(
    "sends",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("request_id", String(255), primary_key=True),  # the X-Request-Id
    Column("fingerprint", String(128), nullable=False),
    Column("state", String(16), nullable=False),  # the recovery point reached
    Column("attempt", Integer, nullable=False),  # fencing token, bumped by every takeover
    Column("locked_until", UTCDateTime, nullable=True),  # the lease; null when none
    Column("tx_hash", Text, nullable=True),
    Column("raw_tx", LargeBinary, nullable=True),
    Column("result", JSON(none_as_null=True), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # The transaction on chain (`follow_sends`, docs/transfers.md): `pending` from the
    # finish of a send the network accepted, `stuck` or `dropped` on the way, then
    # `success` or `failed` once; null: not followed. `tx_hash` and `raw_tx` are the
    # transfer's current transaction (a bump, a cancel or a re-signed one replaces them).
    Column("chain_status", String(16), nullable=True),
    Column("chain_checked_at", UTCDateTime, nullable=True),  # last asked (the finish first)
    Column("chain_final_at", UTCDateTime, nullable=True),  # when it became final
    # What a user's send takes out of the wallet (`SendRecord.spend`, set when signed):
    # counted against a sell's hold while the transfer is in flight (`sends.spending`).
    Column("spend_user_id", String(ID), nullable=True),
    Column("spend_asset_id", Integer, nullable=True),
    Column("spend_units", Units, nullable=True),
    CheckConstraint(f"state IN {SEND_STATES}", name="state"),
    CheckConstraint(SEND_CHAIN_CHECK, name="chain_status"),
    # The follow job (`sends.following`): the pending ones of every client, least recently
    # checked first. Partial: a handful of rows however many sends there are.
    Index(
        "ix_sends_following",
        "chain_checked_at",
        "created_at",
        "client_id",
        "request_id",
        postgresql_where=text(SEND_FOLLOWED),
        sqlite_where=text(SEND_FOLLOWED),
    ),
    # `/txid` of a send's hash (`sends.by_hash`): a dropped transfer is answered pending
    Index("ix_sends_tx_hash", "client_id", "tx_hash"),
    # What a user's sends in flight take (`sends.spending`). Partial: the few in flight.
    Index(
        "ix_sends_spending",
        "client_id",
        "spend_user_id",
        "spend_asset_id",
        postgresql_where=text(SEND_SPENDING),
        sqlite_where=text(SEND_SPENDING),
    ),
)

#: Every hash a replaced send had, and has (`sends.by_hash`): `/txid` of a replaced hash
#: answers the transfer's outcome.
send_hashes = Table(
    "send_hashes",
    metadata,
    Column("client_id", String(ID), primary_key=True),
    Column("tx_hash", Text, primary_key=True),
    Column("request_id", String(255), nullable=False),
    ForeignKeyConstraint(["client_id", "request_id"], ["sends.client_id", "sends.request_id"]),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("entry_id", BigId, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    # no FK: an operator's refused change (`clients disable`) names the id it was given
    Column("client_id", String(ID), nullable=True),
    Column("action", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),
    Column("target", Text, nullable=True),
    Column("detail", Text, nullable=True),
)

# The nonce leases' floors (`walletcore_sql.nonces`): per nonce sequence (`chain`, e.g.
# `eip155:1`) and address, the next nonce this deployment saw accepted. Only ever raised.
nonce_floors = Table(
    "nonce_floors",
    metadata,
    Column("chain", String(64), primary_key=True),
    Column("address", String(128), primary_key=True),
    Column("next_nonce", BigInteger, nullable=False),
    CheckConstraint("next_nonce >= 0", name="next_nonce"),
)

# The deployment's shared price table (`walletcore.ports.prices`): the last known price of
# each symbol in each fiat and when it was recorded, saved by the refresh job and read by
# every HTTP process (`walletcore.pricing.SharedPriceSource`).
price_records = Table(
    "price_records",
    metadata,
    Column("symbol", String(16), primary_key=True),
    Column("fiat", String(8), primary_key=True),
    Column("price", Money, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
)


# -- deposits and the event feed (docs/events.md; docs/storage.md, "Deposits and the event
# feed") ----------------------------------------------------------------------------------

#: Every address a wallet was stored with, by chain: what the deposit scan watches
#: (`DepositStore.watchlist`, one read by the primary key's first column). Written with the
#: wallet, in its unit (`WalletStore.add`, `add_user`, `update`); an address never changes
#: owner, and stays when a wallet's record changes.
watched_addresses = Table(
    "watched_addresses",
    metadata,
    Column("chain", String(24), primary_key=True),
    Column("address", String(128), primary_key=True),
    Column("client_id", String(ID), nullable=False),
    Column("owner", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null for a platform wallet
    CheckConstraint("owner IN ('user', 'platform')", name="owner"),
)

DEPOSIT_STATUSES = "('seen', 'confirmed', 'reversed')"

deposits = Table(
    "deposits",
    metadata,
    Column("deposit_id", String(ID), primary_key=True),
    Column("client_id", String(ID), nullable=False),
    Column("owner", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null for a platform wallet
    Column("chain", String(24), nullable=False),
    Column("asset_id", Integer, nullable=False),
    Column("address", String(128), nullable=False),
    Column("tx_hash", String(128), nullable=False),
    Column("position", String(255), nullable=False),  # `out:1`, `log:7`, `tx`, ...
    Column("amount", Units, nullable=False),  # exact base units (may exceed 2^63)
    Column("sender", Text, nullable=True),
    Column("status", String(16), nullable=False),
    Column("block_height", BigInteger, nullable=True),  # both null: in the mempool
    Column("block_hash", String(128), nullable=True),
    Column("seen_at", UTCDateTime, nullable=False),
    Column("confirmed_at", UTCDateTime, nullable=True),
    Column("reversed_at", UTCDateTime, nullable=True),
    CheckConstraint(f"status IN {DEPOSIT_STATUSES}", name="status"),
    CheckConstraint("owner IN ('user', 'platform')", name="owner"),
    CheckConstraint("(block_height IS NULL) = (block_hash IS NULL)", name="block"),
    # One deposit per credit: a credit found again (another scan, a racing one) is the same.
    UniqueConstraint("chain", "tx_hash", "position"),
    # The settling pass (`deposits.unsettled`): a chain's `seen` ones, oldest first.
    # Partial: a handful of rows however many deposits there are.
    Index(
        "ix_deposits_unsettled",
        "chain",
        "seen_at",
        "tx_hash",
        "position",
        postgresql_where=text("status = 'seen'"),
        sqlite_where=text("status = 'seen'"),
    ),
)

# `POST /deposits` (`deposits.page`): a client's deposits newest first, of one user or all.
Index(
    "ix_deposits_user_seen",
    deposits.c.client_id,
    deposits.c.user_id,
    deposits.c.seen_at.desc(),
    deposits.c.deposit_id.desc(),
)
Index(
    "ix_deposits_client_seen",
    deposits.c.client_id,
    deposits.c.seen_at.desc(),
    deposits.c.deposit_id.desc(),
)

#: How far each chain was scanned: moved by compare-and-set (`DepositStore.advance`).
scan_cursors = Table(
    "scan_cursors",
    metadata,
    Column("chain", String(24), primary_key=True),
    Column("height", BigInteger, nullable=False),
    Column("block_hash", String(128), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

#: The event feed, written with the change it tells of (the outbox): `seq` numbers the
#: rows, `tx` is the writing transaction's id (PostgreSQL; 0 on SQLite), and the feed is
#: read in `(tx, seq)` order below the snapshot's horizon (docs/storage.md, "The event
#: feed"). AUTOINCREMENT on SQLite: a `seq` is never reused, even once pruned.
events = Table(
    "events",
    metadata,
    Column("seq", BigId, primary_key=True, autoincrement=True),
    Column("tx", BigInteger, nullable=False, server_default=current_tx()),
    Column("client_id", String(ID), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null: the platform wallet's
    Column("type", String(32), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("data", JSON, nullable=False),
    Index("ix_events_client_tx_seq", "client_id", "tx", "seq"),
    Index("ix_events_client_user_tx_seq", "client_id", "user_id", "tx", "seq"),
    Index("ix_events_at", "at"),  # the prune job: the oldest first
    sqlite_autoincrement=True,
)

# Signed webhooks (walletcore.domain.webhooks, docs/events.md): one endpoint per api client,
# with what the operator set (URL, sealed secrets, paused, disabled) and how far delivery
# got (the cursor: the position of the last event delivered or given up; the head's
# attempts and next attempt; the lease of the worker delivering it).
#: An endpoint the job delivers to (`ix_webhook_endpoints_due`).
WEBHOOK_ACTIVE = "NOT paused AND disabled_reason IS NULL"

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("url", Text, nullable=False),
    # sealed under the master key (`SecretSealer`), never the secret itself
    Column("secret", LargeBinary, nullable=False),
    Column("previous_secret", LargeBinary, nullable=True),
    Column("previous_until", UTCDateTime, nullable=True),
    Column("paused", Boolean(create_constraint=False), nullable=False),
    Column("disabled_reason", Text, nullable=True),
    Column("disabled_at", UTCDateTime, nullable=True),
    Column("cursor_tx", BigInteger, nullable=True),
    Column("cursor_seq", BigInteger, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=True),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    CheckConstraint("(cursor_tx IS NULL) = (cursor_seq IS NULL)", name="cursor"),
    CheckConstraint("attempts >= 0", name="attempts"),
    # The delivery job (`webhooks.claim`): the active endpoints, the longest due first.
    Index(
        "ix_webhook_endpoints_due",
        "next_attempt_at",
        "client_id",
        postgresql_where=text(WEBHOOK_ACTIVE),
        sqlite_where=text(WEBHOOK_ACTIVE),
    ),
)

WEBHOOK_RESULTS = "('delivered', 'retrying', 'given_up', 'disabled')"

#: The delivery log: one row per attempt at one event (never a secret, never the body).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("attempt_id", BigId, primary_key=True, autoincrement=True),
    Column("client_id", String(ID), nullable=False),
    Column("event_id", String(48), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("status", Integer, nullable=True),  # the HTTP status; null: `error` says why
    Column("error", String(32), nullable=True),
    Column("duration_ms", Integer, nullable=False),
    Column("result", String(16), nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=True),
    CheckConstraint(f"result IN {WEBHOOK_RESULTS}", name="result"),
    # `/webhooks/deliveries` and `walletcore webhooks deliveries`: newest first, of a client
    # or of one of its events
    Index("ix_webhook_attempts_client", "client_id", "at", "attempt_id"),
    Index("ix_webhook_attempts_event", "client_id", "event_id", "at", "attempt_id"),
    # the prune job: the oldest first
    Index("ix_webhook_attempts_at", "at", "attempt_id"),
)


# Settlement of a trade's crypto leg (walletcore.domain.settlement, docs/settlement.md): one
# row per trade that moves coins, moved by compare-and-set on (status, attempt).
SETTLEMENT_STATUSES = (
    "('reserved', 'awaiting_password', 'queued', 'short', 'sent', 'settled', 'failed', 'released')"
)
#: The statuses the settlement job works on (`DUE_STATUSES`, `ix_settlements_due`).
SETTLEMENT_DUE = "status IN ('reserved', 'queued', 'short', 'sent', 'failed')"
#: A sell that holds its coins in the user's wallet (`HOLDING_STATUSES`; a buy's transfer
#: comes into the wallet and holds nothing there): `ix_settlements_held`.
SETTLEMENT_HOLDING = (
    "side = 'sell' AND status IN ('reserved', 'awaiting_password', 'sent', 'failed')"
)

settlements = Table(
    "settlements",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("trade_id", String(ID), primary_key=True),
    Column("user_id", String(ID), nullable=False),
    Column("side", String(8), nullable=False),
    Column("asset_id", Integer, nullable=False),
    Column("units", Units, nullable=False),  # exact base units (may exceed 2^63)
    # a sell's network fee held beside its coins, in `fee_asset_id` (0: the desk pays it)
    Column("fee_units", Units, nullable=False),
    Column("fee_asset_id", Integer, nullable=True),
    Column("status", String(24), nullable=False),
    Column("attempt", Integer, nullable=False),  # transfers made so far
    Column("tx_hash", Text, nullable=True),
    Column("reason", Text, nullable=True),
    Column("due_at", UTCDateTime, nullable=True),  # when the jobs next look at it
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    ForeignKeyConstraint(["client_id", "user_id"], ["users.client_id", "users.user_id"]),
    CheckConstraint("side IN ('buy', 'sell')", name="side"),
    CheckConstraint(f"status IN {SETTLEMENT_STATUSES}", name="status"),
    CheckConstraint("attempt >= 0", name="attempt"),
    # The settlement job (`settlements.due`): of every client, the earliest due first.
    # Partial: the few the jobs work on however many trades settled.
    Index(
        "ix_settlements_due",
        "due_at",
        "trade_id",
        postgresql_where=text(SETTLEMENT_DUE),
        sqlite_where=text(SETTLEMENT_DUE),
    ),
    # What a user's sells hold (`settlements.held`): the few not collected yet.
    Index(
        "ix_settlements_held",
        "client_id",
        "user_id",
        postgresql_where=text(SETTLEMENT_HOLDING),
        sqlite_where=text(SETTLEMENT_HOLDING),
    ),
)

# The desk's accounting (`settlements.listing`): a client's settlements newest first.
Index(
    "ix_settlements_listing",
    settlements.c.client_id,
    settlements.c.created_at.desc(),
    settlements.c.trade_id.desc(),
)

# Deliveries of an asset paused for an api client (walletcore.domain.desk): by the desk's
# reconciliation when a shortfall exceeds the operator's tolerance, or by the operator.
desk_pauses = Table(
    "desk_pauses",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("asset_id", Integer, primary_key=True),
    Column("reason", Text, nullable=False),
    Column("paused_at", UTCDateTime, nullable=False),
)

# -- withdrawal policies (walletcore.domain.policies, docs/policies.md) ---------------------
APPROVAL_STATUSES = "('pending', 'approved', 'rejected', 'expired')"
WALLET_KINDS = "('user', 'platform')"

#: The versions of each api client's policy, append-only, numbered 1, 2, ... per client
#: (`PolicyStore.add_version`); a version not in force yet may be cancelled (deleted).
policy_versions = Table(
    "policy_versions",
    metadata,
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("document", JSON, nullable=False),  # `Policy.document()`, read by `Policy.parse`
    Column("set_at", UTCDateTime, nullable=False),
    Column("effective_at", UTCDateTime, nullable=False),
    Column("set_by", Text, nullable=False),
    CheckConstraint("version >= 1", name="version"),
)

#: The destinations an api client may send to, per chain and optionally per asset. One
#: entry per (client, chain, address, asset): two partial unique indexes, as a NULL asset
#: (any of the chain's) is distinct from every other NULL in a unique index on both
#: databases.
allowlist = Table(
    "allowlist",
    metadata,
    Column("entry_id", BigId, primary_key=True, autoincrement=True),
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), nullable=False),
    Column("chain", String(24), nullable=False),
    Column("address", String(128), nullable=False),
    Column("asset_id", Integer, nullable=True),  # null: any asset of the chain
    Column("label", Text, nullable=False),
    Column("added_at", UTCDateTime, nullable=False),
    Column("usable_at", UTCDateTime, nullable=False),  # the cooling-off's end
    Column("added_by", Text, nullable=False),
    Index(
        "uq_allowlist_asset",
        "client_id",
        "chain",
        "address",
        "asset_id",
        unique=True,
        postgresql_where=text("asset_id IS NOT NULL"),
        sqlite_where=text("asset_id IS NOT NULL"),
    ),
    Index(
        "uq_allowlist_chain",
        "client_id",
        "chain",
        "address",
        unique=True,
        postgresql_where=text("asset_id IS NULL"),
        sqlite_where=text("asset_id IS NULL"),
    ),
)

#: Transfers counted against velocity limits, one per (client, X-Request-Id): counting a
#: request again replaces its row (`PolicyStore.count`). Pruned past the longest window.
policy_usage = Table(
    "policy_usage",
    metadata,
    Column("client_id", String(ID), primary_key=True),
    Column("request_id", String(255), primary_key=True),
    Column("wallet", String(16), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null: the platform wallet's
    Column("chain", String(24), nullable=False),
    Column("asset_id", Integer, nullable=False),
    Column("amount_units", Units, nullable=False),  # exact base units (may exceed 2^63)
    Column("at", UTCDateTime, nullable=False),
    CheckConstraint(f"wallet IN {WALLET_KINDS}", name="wallet"),
    # A decision's windows (`policies.used`): a client's counts since an instant.
    Index("ix_policy_usage_client_at", "client_id", "at"),
    # The prune job (`policies.prune_usage`): the oldest of every client first.
    Index("ix_policy_usage_at", "at"),
)

#: Transfers held by a `require_approval` rule, one per (client, X-Request-Id), moved by
#: compare-and-set on (status, approvers). `approvers` is the JSON list as text, so the
#: compare-and-set compares it as text (PostgreSQL's `json` has no equality).
transfer_approvals = Table(
    "transfer_approvals",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("client_id", String(ID), ForeignKey("api_clients.client_id"), nullable=False),
    Column("request_id", String(255), nullable=False),
    Column("rule", Text, nullable=False),
    Column("required", Integer, nullable=False),
    Column("initiated_by", Text, nullable=False),
    # the transfer held (`walletcore.domain.policies.Transfer`)
    Column("wallet", String(16), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("user_id", String(ID), nullable=True),  # null: the platform wallet's
    Column("chain", String(24), nullable=False),
    Column("asset_id", Integer, nullable=False),
    Column("symbol", String(16), nullable=False),
    Column("decimals", Integer, nullable=False),
    Column("amount_units", Units, nullable=False),
    Column("recipient", String(128), nullable=False),
    Column("destination", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),
    Column("approvers", Text, nullable=False),  # a JSON list of names, in approval order
    Column("decided_at", UTCDateTime, nullable=True),
    Column("reason", Text, nullable=True),
    CheckConstraint(f"status IN {APPROVAL_STATUSES}", name="status"),
    CheckConstraint(f"wallet IN {WALLET_KINDS}", name="wallet"),
    CheckConstraint("required >= 1", name="required"),
    UniqueConstraint("client_id", "request_id"),
)

# `walletcore approvals list` (`policies.approvals`): newest first, of one client in some
# statuses, or of every client.
Index(
    "ix_transfer_approvals_listing",
    transfer_approvals.c.client_id,
    transfer_approvals.c.status,
    transfer_approvals.c.created_at.desc(),
    transfer_approvals.c.id.desc(),
)
Index(
    "ix_transfer_approvals_created",
    transfer_approvals.c.created_at.desc(),
    transfer_approvals.c.id.desc(),
)

#: The people who approve held transfers: a name and the SHA-256 of their key, never the
#: key; disabled, never deleted.
operators = Table(
    "operators",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("key_hash", String(128), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("disabled_at", UTCDateTime, nullable=True),
)
