"""For the tests of adapters and of code that embeds the core: small in-memory fakes of the
ports, and the contract suites an adapter proves itself with.

Fakes (importable without pytest, no I/O library):
- `CONTRACT_CATALOG`: the contract's sixteen assets, which the fakes default to;
- `InMemoryStorage` (also `WALLETCORE_REPO=memory`, by name), `autocommit(storage)`
  for seeding and checking state one call at a time;
- `LocalNonceLeases`: the nonce leases of one process (not a fake: `walletcore.nonces`);
- `ManualClock`: time that moves when told;
- `FakeKeyStore`: a FAKE KeyStore (no real keys; addresses no chain accepts);
- `FixedPrices`, `InstantVenue`: a price source and a venue that fills at once;
- `FixedHoldings`: what users' wallets hold, for trades that are not about sell backing;
- `FakeGateway`, `FollowedFakeGateway` (`walletcore.testing.chains`): one chain in memory
  for the FAKE KeyStore's addresses, every call recorded, broadcasts and (followed) what
  the chain sees of each transaction scripted by the test;
- `RecordingSender` (`walletcore.testing.webhooks`): a FAKE webhook sender that records
  each message and answers what the test scripted.

Contracts (`walletcore.testing.contracts`, needs pytest and pytest-asyncio): subclass
`StorageContract` or `NonceLeasesContract` in a test module and override its fixture.
"""

from walletcore.clock import ManualClock
from walletcore.nonces import LocalNonceLeases
from walletcore.testing.catalog import CONTRACT_CATALOG
from walletcore.testing.chains import FakeGateway, FollowedFakeGateway, Outcome
from walletcore.testing.keys import FakeKeyStore
from walletcore.testing.markets import FixedHoldings, FixedPrices, InstantVenue
from walletcore.testing.storage import InMemoryStorage, autocommit
from walletcore.testing.webhooks import RecordingSender

__all__ = [
    "CONTRACT_CATALOG",
    "FakeGateway",
    "FakeKeyStore",
    "FixedHoldings",
    "FixedPrices",
    "FollowedFakeGateway",
    "InMemoryStorage",
    "InstantVenue",
    "LocalNonceLeases",
    "ManualClock",
    "Outcome",
    "RecordingSender",
    "autocommit",
]
