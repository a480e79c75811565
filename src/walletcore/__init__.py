"""walletcore: the pure core of a multi-chain custodial wallet service.

Three lines to start (sandbox profile, settings from `WALLETCORE_*`):

    from walletcore import create_container
    container = create_container()
    trading = container.trading()
"""

from walletcore.container import Container, create_container
from walletcore.domain.errors import DomainError
from walletcore.services.context import Caller
from walletcore.settings import Profile, Settings

__all__ = ["Caller", "Container", "DomainError", "Profile", "Settings", "create_container"]
__version__ = "0.1.0"
