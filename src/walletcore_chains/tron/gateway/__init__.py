"""`TronGateway`: the `ChainGateway` of TRON (TRX and the TRC20 tokens) on a full node's
HTTP API (docs/tron.md).

- fee: what Tron burns. Bandwidth = the signed transaction's bytes + 64 (java-tron's
  result reserve), free when the sender's staked or free daily bandwidth covers it all, else
  bytes x `getTransactionFee`; a TRX transfer to an account that does not exist yet burns
  `getCreateAccountFee` instead (unless staked bandwidth covers it) plus the activation fee
  `getCreateNewAccountFeeInSystemContract`. Energy (TRC20): the node's estimate of this very
  transfer (`estimateenergy`, else a constant call's `energy_used`); what staked energy does
  not cover burns at `getEnergyFee`. The transaction's `fee_limit` is the estimate + the
  margin, priced; the quote's TRX is the most the transfer can burn (that limit included).
- PLATFORM: the platform wallet tops the sender up with exactly that most-it-can-burn in a
  TRX transfer of its own (activating a sender that never held TRX), which must be in a
  block before the sender's transfer goes; unused TRX stays with the sender.
- The txID is the SHA-256 of `raw_data`'s protobuf bytes, built here (never taken from the
  node); the signature is the KeyStore's over it. The signed `Transaction` bytes are kept
  and re-sent unchanged on a retry (`wallet/broadcasthex`): `DUP_TRANSACTION_ERROR` counts
  as sent; an expired transaction is sent only if the node knows it.
- Followed (`walletcore.ports.TransferFollower`): `sighting` reads one transaction on the
  chain, in the pending pool, or past its expiration. TRON has no fee replacement: a
  transaction that can no longer land (EXPIRED) is re-signed (`resigns`: `prepare` again
  with a fresh quote: a new reference block, expiration and txID).
- Deposits (`walletcore.ports.DepositScanner`): blocks read by range, each block's
  receipts once, every watched address matched at once (TRX transfers, TRC20 `Transfer`
  logs of the served tokens, TRX moved inside contract calls); `confirmations` is the
  depth java-tron solidifies a block at (19).

The parts, one reason to change each: `base` (options, state, addresses, the transaction's
shape), `reads`, `fees`, `building` (prepare, assemble), `sending` (broadcast), `following`
(the transfer lifecycle), `scanning` (deposits).
"""

from __future__ import annotations

from tronpy.keys import to_base58check_address  # type: ignore[import-untyped]

from walletcore.ports import ChainGateway, DepositScanner, TransferFollower
from walletcore_chains.tron.gateway.base import TronOptions
from walletcore_chains.tron.gateway.fees import FALLBACK_ENERGY, RESULT_RESERVE, Cost
from walletcore_chains.tron.gateway.following import Following
from walletcore_chains.tron.gateway.scanning import Scanning


class TronGateway(Following, Scanning, ChainGateway, TransferFollower, DepositScanner):
    """The `ChainGateway` of TRON (or a chain of its rules, told in `chain`)."""

    #: TRON has no fee replacement: an EXPIRED transfer is signed again (`prepare`)
    resigns = True


__all__ = [
    "FALLBACK_ENERGY",
    "RESULT_RESERVE",
    "Cost",
    "TronGateway",
    "TronOptions",
    "to_base58check_address",
]
