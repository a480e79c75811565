"""Port contract suites: subclass one in a test module, give it its fixture, and pytest
runs every promise of the port against your adapter.

    from walletcore.testing.contracts import NonceLeasesContract, StorageContract

Imports pytest and pytest-asyncio (test dependencies); the rest of `walletcore.testing`
does not.
"""

from walletcore.testing.contracts.nonces import NonceLeasesContract
from walletcore.testing.contracts.storage import StorageContract

__all__ = ["NonceLeasesContract", "StorageContract"]
