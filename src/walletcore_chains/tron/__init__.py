"""The chain plugin `tron` (docs/tron.md): its definition and entry point are in
`tron/plugin.py`, re-exported here (`walletcore_chains.tron:PLUGIN`)."""

from __future__ import annotations

from walletcore_chains.tron.plugin import (
    PATH,
    PLUGIN,
    TronSettings,
    address_of,
    validate_address,
    verify_signature,
)

__all__ = [
    "PATH",
    "PLUGIN",
    "TronSettings",
    "address_of",
    "validate_address",
    "verify_signature",
]
