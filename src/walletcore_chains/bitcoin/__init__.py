"""The chain plugin `bitcoin` (docs/bitcoin.md): its definition and entry point are in
`bitcoin/plugin.py`, re-exported here (`walletcore_chains.bitcoin:PLUGIN`)."""

from __future__ import annotations

from walletcore_chains.bitcoin.plugin import (
    PATH,
    PLUGIN,
    BitcoinSettings,
    address_of,
    validate_address,
    verify_signature,
)

__all__ = [
    "PATH",
    "PLUGIN",
    "BitcoinSettings",
    "address_of",
    "validate_address",
    "verify_signature",
]
