"""The ports: async `typing.Protocol`s the core drives, in domain types only, one module
per reason to change:

- `trading`: `PriceSource`, `TradeVenue` (and `PriceMap`);
- `keys`: `KeyStore`, `ChainSigner`, `NewWallet`;
- `chains`: `ChainGateway` and the transfer values (`Transfer`, `UnsignedTransfer`,
  `SignedTransfer`, `FeeQuote`), `AddressValidator`, `SignatureVerifier`, and
  `MinimumSends` (`SendMinimum`), what a gateway whose chain has a minimum transfer adds;
- `storage`: `Storage`, its `UnitOfWork` and the stores (`ClientStore`, `WalletStore`,
  `TradeStore`, `SendStore`, `AuditStore`, `DepositStore`, `EventStore`);
- `deposits`: `DepositScanner` (a gateway's deposit scanning), `MEMPOOL`;
- `follow`: `TransferFollower`, `Sighting`, `Replacement` (the transfer lifecycle);
- `nonces`: `NonceLeases`, `NonceLease`;
- `policies`: `PolicyStore` (withdrawal policies, on every unit of work);
- `prices`: `PriceRecords` (the shared price table, on every unit of work), `StoredPrices`;
- `runtime`: `Clock`, `Lifecycle`;
- `health`: `HealthCheck`, `PriceAges` (optional, for readiness), `CheckFailed`;
- `metrics`: `Observer` (the service's measurements, no-op by default);
- `webhooks`: `WebhookSender`, `WebhookStore` (on every unit of work), `SecretSealer`,
  `WebhookMessage`, `SendOutcome`.

Every name is re-exported here: `from walletcore.ports import Storage`. Adapters implement
them (and may subclass them, so a type checker sees the promise); `walletcore.testing` holds
in-memory ones and the contract suites an adapter proves itself with.
"""

from walletcore.ports.chains import (
    AddressValidator,
    ChainGateway,
    FeeQuote,
    MinimumSends,
    SendMinimum,
    SignatureVerifier,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)
from walletcore.ports.deposits import MEMPOOL, DepositScanner, Unmined
from walletcore.ports.follow import Replacement, Sighting, TransferFollower
from walletcore.ports.health import CheckFailed, HealthCheck, PriceAges
from walletcore.ports.keys import ChainSigner, KeyStore, NewWallet
from walletcore.ports.metrics import Observer
from walletcore.ports.nonces import NonceLease, NonceLeases
from walletcore.ports.policies import PolicyStore
from walletcore.ports.prices import PriceRecords, StoredPrices
from walletcore.ports.runtime import Clock, Lifecycle
from walletcore.ports.storage import (
    AuditStore,
    ClientStore,
    DepositStore,
    DeskPauseStore,
    EventStore,
    SendStore,
    SettlementStore,
    Storage,
    TradeStore,
    UnitOfWork,
    WalletStore,
)
from walletcore.ports.trading import PriceMap, PriceSource, TradeVenue
from walletcore.ports.webhooks import (
    SecretSealer,
    SendOutcome,
    WebhookMessage,
    WebhookSender,
    WebhookStore,
)

__all__ = [
    "MEMPOOL",
    "AddressValidator",
    "AuditStore",
    "ChainGateway",
    "ChainSigner",
    "CheckFailed",
    "ClientStore",
    "Clock",
    "DepositScanner",
    "DepositStore",
    "DeskPauseStore",
    "EventStore",
    "FeeQuote",
    "HealthCheck",
    "KeyStore",
    "Lifecycle",
    "MinimumSends",
    "NewWallet",
    "NonceLease",
    "NonceLeases",
    "Observer",
    "PolicyStore",
    "PriceAges",
    "PriceMap",
    "PriceRecords",
    "PriceSource",
    "Replacement",
    "SecretSealer",
    "SendMinimum",
    "SendOutcome",
    "SendStore",
    "SettlementStore",
    "Sighting",
    "SignatureVerifier",
    "SignedTransfer",
    "Storage",
    "StoredPrices",
    "TradeStore",
    "TradeVenue",
    "Transfer",
    "TransferFollower",
    "UnitOfWork",
    "Unmined",
    "UnsignedTransfer",
    "WalletStore",
    "WebhookMessage",
    "WebhookSender",
    "WebhookStore",
]
