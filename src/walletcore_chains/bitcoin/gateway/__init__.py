"""`BitcoinGateway`: the `ChainGateway` of BITCOIN over a backend (Esplora or Core RPC).

- balance: the wallet's spendable coins (confirmed, mature, plus its own unconfirmed
  change; coins received from others count once mined); `AddressUnknown` (404) when the
  backend knows no transaction of the address.
- fee: the transfer's virtual size x the backend's fee rate for `fee_target` blocks (at
  least the node's minimum relay fee); `spend.quote`.
- prepare: under the address's lease (and the sponsor's), the coins that pay exactly the
  quoted fee (`spend.pay`), one BIP143 digest per coin; `assemble` puts the signatures in.
- broadcast: the backend's; the txid the node reports must be the one stored. The lease is
  held until the backend shows the transaction (so the next send sees its change).
- rows: `send` when the wallet paid coins in, `receive` otherwise; amounts net of the
  wallet's change; `pending` until `confirmations` deep, `failed` once replaced.
- lifecycle (`TransferFollower`, `follow.py`): `sighting` of one transaction,
  `replacements` (the replace-by-fee ladder, offline), `prepare_cpfp` (child pays for a
  received parent).
- deposits (`DepositScanner`): every output paying a watched address, block by block and
  in the mempool, and where a transaction is now.

The parts, one reason to change each: `base` (options, state, addresses), `reads` (coins,
balance, history, lookup), `fees`, `building` (prepare, assemble, release), `sending`
(broadcast), `following` (the transfer lifecycle), `scanning` (the deposit scan).
"""

from __future__ import annotations

from walletcore.ports import ChainGateway, DepositScanner, MinimumSends, TransferFollower
from walletcore_chains.bitcoin.gateway.base import (
    COINBASE_MATURITY,
    REGTEST_STUCK_AFTER_SECONDS,
    RESERVE_SECONDS,
    SCAN_SPAN,
    STUCK_AFTER_SECONDS,
    GatewayOptions,
)
from walletcore_chains.bitcoin.gateway.following import Following
from walletcore_chains.bitcoin.gateway.scanning import Scanning


class BitcoinGateway(
    Following, Scanning, ChainGateway, TransferFollower, MinimumSends, DepositScanner
):
    """The `ChainGateway` of a Bitcoin-rules chain (BITCOIN unless told another)."""

    #: a Bitcoin transaction never expires: a stuck send is replaced from its ladder
    resigns = False


__all__ = [
    "COINBASE_MATURITY",
    "REGTEST_STUCK_AFTER_SECONDS",
    "RESERVE_SECONDS",
    "SCAN_SPAN",
    "STUCK_AFTER_SECONDS",
    "BitcoinGateway",
    "GatewayOptions",
]
