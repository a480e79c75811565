"""walletcore's HTTP binding on Litestar: app factory, plugin, operator CLI."""

from walletcore_litestar.app import create_app
from walletcore_litestar.plugin import WalletcorePlugin

__all__ = ["WalletcorePlugin", "create_app"]
