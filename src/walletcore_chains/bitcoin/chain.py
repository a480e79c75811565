"""BITCOIN as the core sees it: its description (`DESCRIPTION`) and how the sandbox
ledger plays it (`SandboxBitcoin`). Imports no chain library."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.chains import (
    HEX,
    ChainDescription,
    FeeQuote,
    SandboxBook,
    SendMinimum,
    WrongPassword,
)

CHAIN = Chain.BITCOIN
#: the rule of BITCOIN's minimum, as a refusal names it
DUST_RULE = "the dust limit of its address type"
#: human-readable parts of the bech32 addresses of Bitcoin's networks
_BECH32_HRPS = frozenset({"bc", "tb", "bcrt"})


def btc_dust_limit(address: str, sat_per_kvb: int = 3_000) -> int:
    """The node's dust limit of an output to `address` (`GetDustThreshold`: the output and
    the input that spends it, at the dust relay fee), its locking script read from the
    address's form: a bech32 address holds a 20-byte (P2WPKH) or a 32-byte program (P2WSH,
    P2TR); a base58 one is P2SH when it starts with `3` or `2`, else P2PKH."""
    hrp, separator, data = address.lower().rpartition("1")
    if separator and hrp in _BECH32_HRPS:
        script, spend = (22 if len(data) == 39 else 34), 32 + 4 + 1 + 107 // 4 + 4
    else:
        script, spend = (23 if address[:1] in ("3", "2") else 25), 32 + 4 + 1 + 107 + 4
    return (8 + 1 + script + spend) * sat_per_kvb // 1000


@dataclass(frozen=True, slots=True)
class SandboxBitcoin:
    """`SandboxRules` of BITCOIN: virtual size x fee rate (a one-input, two-output P2WPKH
    transfer is 141 vB; a sponsor adds an input and its change, +99 vB), the dust limit of
    the recipient's address type as the minimum, the double SHA-256 of the raw transaction
    (byte-reversed) as its hash; an Esplora-like indexer knows only addresses it has
    seen."""

    sat_per_vbyte: int = 10
    transfer_vbytes: int = 141
    sponsor_vbytes: int = 99
    #: the node's dust relay fee (sat/kvB): an output worth less than spending it is refused
    dust_relay_sat_per_kvb: int = 3_000
    signs_digest: bool = True
    seen_addresses_only: bool = True

    async def fee(
        self, book: SandboxBook, recipient: str, asset: Asset, *, sponsored: bool
    ) -> FeeQuote:
        vbytes = self.transfer_vbytes + (self.sponsor_vbytes if sponsored else 0)
        return FeeQuote(vbytes * self.sat_per_vbyte)

    async def minimum_send(
        self, book: SandboxBook, recipient: str, asset: Asset
    ) -> SendMinimum | None:
        return SendMinimum(btc_dust_limit(recipient, self.dust_relay_sat_per_kvb), DUST_RULE)

    def tx_hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        return hashlib.sha256(hashlib.sha256(raw).digest()).digest()[::-1].hex()


DESCRIPTION = ChainDescription(
    chain=CHAIN,
    assets=tuple(a for a in CONTRACT_ASSETS if a.chain == CHAIN),
    replaces_by="fee-bump",
    default_fee_cap=Decimal("0.0005"),
    wrong_password=WrongPassword.INVALID_PASSWORD_400,
    hashes=HEX,
    sandbox=SandboxBitcoin(),
)

__all__ = ["CHAIN", "DESCRIPTION", "DUST_RULE", "SandboxBitcoin", "btc_dust_limit"]
