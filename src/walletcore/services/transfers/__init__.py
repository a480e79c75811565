"""The transfer lifecycle: every broadcast followed to its end (docs/transfers.md).

A send's idempotency record (walletcore.domain.sends) holds one transfer: its current
transaction and the ones it had before (`SignedSend.earlier`), and the rungs of its
pre-signed ladder (`SignedSend.ladder`). On chains whose gateway is a `TransferFollower`
(walletcore.ports.follow) the `follow_sends` job calls `Transfers.follow` on each send not
final yet:

- every transaction of the transfer is asked of the chain (`sighting`), the current one
  first; the first found final settles the transfer (`success`; `failed` when it reverted
  or when it is a cancel), and becomes its current transaction;
- the current one pending longer than the chain's `stuck_after_seconds`: `stuck`, and with
  automatic bumping (`WALLETCORE_FEE_BUMP=auto`) the next `bump` rung takes its place;
- missing from the node (evicted, dropped): `dropped`, and the same bytes are broadcast
  again; refused now (underpriced, say), the next bump rung, else the cancel, re-fills its
  place (an EVM nonce never stays empty, so later sends never wait behind it);
- taken over by a transaction this service did not send: `failed`;
- expired (SOLANA, TRON: it can never land as signed): re-signed with a fresh blockhash or
  reference block, by the job for a platform send (its key opens without a password), on
  the client's `/send` replay for a user's send (the replay carries the password); `dropped`
  until then.

A replacement is stored (compare and set on the transfer's current hash, with its audit
entry) before it is broadcast: two runs racing store one, and a re-signed transfer is never
signed twice. Broadcasting a stored rung again is harmless (the same bytes).

The rooms, each with one reason to change: `signing` (the fee caps, the ladder, signing a
transfer), `moves` (the record's compare-and-set moves and what the chain says),
`replacing` (bumps, cancels, re-broadcasts, re-signs), `following` (the job's run on one
send), `operator` (`walletcore sends show|bump|cancel`), and `service` (`Transfers`, the
object the container builds).
"""

from walletcore.services.transfers.moves import Followed
from walletcore.services.transfers.operator import describe
from walletcore.services.transfers.service import Transfers
from walletcore.services.transfers.signing import (
    TransferSettings,
    Wallets,
    follower,
    sign_transfer,
)

__all__ = [
    "Followed",
    "TransferSettings",
    "Transfers",
    "Wallets",
    "describe",
    "follower",
    "sign_transfer",
]
