"""`FakeGateway` and `FollowedFakeGateway`: one chain in memory, for the tests of the send and
transfer use cases without a chain library. FAKES: nothing here is a network.

- Addresses are `FakeKeyStore`'s (`fake-<chain>-<40 hex>`, any case; stored lower case):
  a wallet the fake keystore made can send and receive here, and nowhere else.
- Balances are what the test gives (`fund`). The first broadcast the fake accepts of a
  transfer moves them at once, as a ledger would (amount, and the fee from its payer); a
  broadcast of the same transfer again (its bytes, or a rung of its ladder: the same
  nonce) moves nothing. Which transaction of a followed transfer lands is what the test
  says (`sightings`), not what the balances show.
- Fees are fixed: `native_fee` or `token_fee`, plus `sponsor_fee` when another address
  pays (a second signature); `fees` overrides them per asset id.
- Minimums (`MinimumSends`): `minimums` per asset id; none by default.
- Every call is recorded (`calls`, and `prepared`, `assembled`, `broadcasts`, `released`).
- Broadcast outcomes are scripted: `outcomes` is consumed one per broadcast (`ACCEPTED`,
  `ANSWER_LOST`: accepted but the answer never came, or an exception to raise: nothing
  sent); `refuse` refuses a hash every time. Accepted is the default.
- `errors`: a method name (`balance`, `lookup`, `fee`, `prepare`, `sighting`...) -> the
  error every call of it raises (a node that cannot be asked, say).
- `holds`: a method name (`prepare`, `broadcast`) -> an event the call waits for (once
  recorded), to interleave concurrent requests where a test wants them.
- `known_only`: like a Bitcoin indexer, `balance` of an address that never held anything
  raises `AddressUnknown`.

`FollowedFakeGateway` adds the transfer lifecycle (`TransferFollower`): `sightings` says
what the chain sees of each hash (an accepted broadcast is `PENDING`, an unknown hash
`MISSING`), and `replacements`
builds a ladder of `bumps` rungs of rising fee and a cancel, each under the cap (unless
`ignores_cap`: a buggy gateway); with `resigns` it builds none (SOLANA, TRON).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from enum import Enum
from typing import Any, Literal

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import (
    AddressUnknown,
    BroadcastTimeout,
    InsufficientFunds,
    InvalidRequest,
    TransactionNotFound,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports.chains import (
    ChainGateway,
    FeeQuote,
    MinimumSends,
    SendMinimum,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)
from walletcore.ports.deposits import MEMPOOL, DepositScanner, Unmined
from walletcore.ports.follow import Replacement, Sighting, TransferFollower
from walletcore.testing.catalog import CONTRACT_CATALOG

#: Per chain: the native fee, a token's fee, and what a sponsor's signature adds, in the
#: native base units (the sandbox chains' figures, docs/wallet-operations.md).
FAKE_FEES: dict[Chain, tuple[int, int, int]] = {
    Chain.BITCOIN: (1_410, 1_410, 990),
    Chain.ETHEREUM: (420_000_000_000_000, 1_300_000_000_000_000, 0),
    Chain.BSC: (63_000_000_000_000, 195_000_000_000_000, 0),
    Chain.POLYGON: (630_000_000_000_000, 1_950_000_000_000_000, 0),
    Chain.TRON: (268_000, 13_995_000, 0),
    Chain.SOLANA: (5_000, 5_000, 5_000),
}
#: The chains that re-sign a transfer instead of replacing it by fee.
RESIGNING_CHAINS = frozenset({Chain.SOLANA, Chain.TRON})


class Outcome(Enum):
    """A scripted broadcast that raises nothing of its own."""

    #: The node takes it (or knew it already): its hash is answered.
    ACCEPTED = "accepted"
    #: The node takes it, and the answer is lost on the way: `BroadcastTimeout`.
    ANSWER_LOST = "answer lost"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


class FakeGateway(ChainGateway, MinimumSends):
    """One chain in memory (see the module): no lifecycle, so the follow job reads its
    `lookup` (`confirm` a hash to make it final), as it reads the sandbox chain's."""

    def __init__(
        self,
        chain: Chain,
        *,
        native_fee: int | None = None,
        token_fee: int | None = None,
        sponsor_fee: int | None = None,
        known_only: bool = False,
        catalog: Catalog = CONTRACT_CATALOG,
    ) -> None:
        default = FAKE_FEES[chain]
        self.chain = chain
        #: the chain's coin, which pays the fees
        self.native = catalog.native_asset(chain)
        self.native_fee = default[0] if native_fee is None else native_fee
        self.token_fee = default[1] if token_fee is None else token_fee
        self.sponsor_fee = default[2] if sponsor_fee is None else sponsor_fee
        #: asset id -> its fee quote, over `native_fee` / `token_fee`
        self.fees: dict[int, FeeQuote] = {}
        #: asset id -> the least a transfer of it may deliver
        self.minimums: dict[int, SendMinimum] = {}
        #: (address, asset id) -> base units held
        self.balances: dict[tuple[str, int], int] = {}
        self.outcomes: list[Outcome | BaseException] = []
        self.refuse: dict[str, BaseException] = {}
        self.holds: dict[str, asyncio.Event] = {}
        self.errors: dict[str, BaseException] = {}
        self.known_only = known_only
        #: tx hash -> the spec's status its lookup answers (`pending` until confirmed)
        self.statuses: dict[str, str] = {}
        self.calls: list[tuple[str, ...]] = []
        self.prepared: list[UnsignedTransfer] = []
        self.assembled: list[SignedTransfer] = []
        self.broadcasts: list[str] = []
        self.released: list[UnsignedTransfer] = []
        #: tx hash -> the body of each transaction the fake accepted
        self.accepted: dict[str, dict[str, Any]] = {}
        self._nonce = 0
        self._moved: set[tuple[str, int]] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chain.value}, FAKE)"

    # -- what a test sets -----------------------------------------------------------------
    def fund(self, address: str, asset: Asset, units: int) -> None:
        key = (address.lower(), asset.id)
        self.balances[key] = self.balances.get(key, 0) + units

    def confirm(self, tx_hash: str, status: str = "success") -> None:
        """The lookup of `tx_hash` answers `status` from now on."""
        self.statuses[tx_hash] = status

    def body_of(self, tx_hash: str) -> dict[str, Any]:
        """The transfer of an assembled transaction (sender, recipient, amount, fee...)."""
        for signed in self.assembled:
            if signed.tx_hash == tx_hash:
                return dict(json.loads(json.loads(signed.raw)["body"]))
        raise KeyError(tx_hash)

    # -- ChainGateway -------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        text = address.lower()
        prefix = f"fake-{self.chain.value.lower()}-"
        digits = text[len(prefix) :]
        if (
            not text.startswith(prefix)
            or len(digits) != 40
            or any(c not in "0123456789abcdef" for c in digits)
        ):
            raise InvalidRequest(f"Invalid {self.chain} address: expected {prefix}<40 hex digits>")
        return text

    async def balance(self, address: str, asset: Asset) -> int:
        self._call("balance", address, str(asset.id))
        if self.known_only and not any(a == address for a, _ in self.balances):
            raise AddressUnknown()
        return self.balances.get((address, asset.id), 0)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        self._call("history", address, str(asset.id))
        rows = [
            self._row(tx_hash, body, address)
            for tx_hash, body in reversed(self.accepted.items())
            if body["asset"] == asset.id and address in (body["from"], body["to"])
        ]
        return rows[:limit]

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        self._call("lookup", address, str(asset.id), tx_hash)
        body = self.accepted.get(tx_hash)
        if body is None or body["asset"] != asset.id or address not in (body["from"], body["to"]):
            raise TransactionNotFound()
        return self._row(tx_hash, body, address)

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        sponsored = fee_payer is not None and fee_payer != sender
        self._call("fee", sender, recipient, str(asset.id), str(fee_payer))
        quote = self.fees.get(asset.id)
        if quote is None:
            quote = FeeQuote(self.native_fee if asset.is_native else self.token_fee)
        if sponsored:
            quote = FeeQuote(quote.native_units + self.sponsor_fee, quote.bandwidth, quote.energy)
        return quote

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        self._call("minimum_send", recipient, str(asset.id))
        return self.minimums.get(asset.id)

    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        self._call("prepare", transfer.sender, transfer.recipient)
        await self._held("prepare")
        if transfer.asset.chain != self.chain:
            raise ValueError(f"{transfer.asset.symbol} is not on {self.chain}")
        self._nonce += 1
        body = {
            "chain": self.chain.value,
            "asset": transfer.asset.id,
            "from": transfer.sender,
            "to": transfer.recipient,
            "amount": transfer.amount_units,
            "fee": fee.native_units,
            "feePayer": transfer.fee_payer,
            "nonce": self._nonce,
            "kind": "send",
        }
        unsigned = self._unsigned(transfer, fee, body)
        self.prepared.append(unsigned)
        return unsigned

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        signers = unsigned.transfer.signers
        if set(signatures) != set(signers):
            raise ValueError("one signature per signer is needed")
        raw = _canonical(
            {
                "body": unsigned.body.decode("utf-8"),
                "signatures": [[s, signatures[s].hex()] for s in signers],
            }
        )
        signed = SignedTransfer(raw, hashlib.sha256(raw).hexdigest())
        self.assembled.append(signed)
        return signed

    async def broadcast(self, signed: SignedTransfer) -> str:
        self.broadcasts.append(signed.tx_hash)
        self._call("broadcast", signed.tx_hash)
        await self._held("broadcast")
        refused = self.refuse.get(signed.tx_hash)
        if refused is not None:
            raise refused
        outcome = self.outcomes.pop(0) if self.outcomes else Outcome.ACCEPTED
        if isinstance(outcome, BaseException):
            raise outcome
        self._accept(signed)
        if outcome is Outcome.ANSWER_LOST:
            raise BroadcastTimeout()
        return signed.tx_hash

    async def release(self, unsigned: UnsignedTransfer) -> None:
        self.released.append(unsigned)
        self._call("release", str(json.loads(unsigned.body)["nonce"]))

    # -- the fake's own -----------------------------------------------------------------
    def _unsigned(
        self, transfer: Transfer, fee: FeeQuote, body: Mapping[str, Any]
    ) -> UnsignedTransfer:
        raw = _canonical(body)
        return UnsignedTransfer(transfer, fee, hashlib.sha256(raw).digest(), raw)

    def _call(self, method: str, *args: str) -> None:
        """Record a call, then raise its scripted error, if any."""
        self.calls.append((method, *args))
        error = self.errors.get(method)
        if error is not None:
            raise error

    async def _held(self, method: str) -> None:
        event = self.holds.get(method)
        if event is not None:
            await event.wait()

    def _accept(self, signed: SignedTransfer) -> None:
        body = json.loads(json.loads(signed.raw)["body"])
        key = (str(body["from"]), int(body["nonce"]))
        if key not in self._moved:  # the first of a transfer's transactions the node takes
            self._move(body)
            self._moved.add(key)
        self.accepted[signed.tx_hash] = body
        self._accepted(signed.tx_hash)

    def _accepted(self, tx_hash: str) -> None:
        """A hook: the node holds `tx_hash` now."""

    def _move(self, body: Mapping[str, Any]) -> None:
        asset_id, amount, fee = int(body["asset"]), int(body["amount"]), int(body["fee"])
        sender, recipient, payer = str(body["from"]), str(body["to"]), str(body["feePayer"])
        native = self.native.id
        needs = {(sender, asset_id): amount}
        needs[(payer, native)] = needs.get((payer, native), 0) + fee
        for key, units in needs.items():
            if self.balances.get(key, 0) < units:
                raise InsufficientFunds("Insufficient balance at broadcast; nothing was sent")
        for key, units in needs.items():
            self.balances[key] -= units
        credit = (recipient, asset_id)
        self.balances[credit] = self.balances.get(credit, 0) + amount

    def _row(self, tx_hash: str, body: Mapping[str, Any], address: str) -> TxRow:
        return TxRow(
            hash=tx_hash,
            type="send" if address == body["from"] else "receive",
            amount_units=int(body["amount"]),
            fee_units=int(body["fee"]),
            status=self._status(tx_hash),
            date=None,
        )

    def _status(self, tx_hash: str) -> str:
        return self.statuses.get(tx_hash, "pending")


class FollowedFakeGateway(FakeGateway, TransferFollower):
    """A `FakeGateway` with the transfer lifecycle (see the module)."""

    def __init__(
        self,
        chain: Chain,
        *,
        resigns: bool | None = None,
        stuck_after_seconds: float = 60.0,
        bumps: int = 3,
        ignores_cap: bool = False,
        **options: Any,
    ) -> None:
        """`options`: `FakeGateway`'s (fees, `known_only`)."""
        super().__init__(chain, **options)
        self.resigns = chain in RESIGNING_CHAINS if resigns is None else resigns
        self.stuck_after_seconds = stuck_after_seconds
        self.bumps = bumps
        self.ignores_cap = ignores_cap
        #: tx hash -> what the chain says of it (`MISSING` when unset)
        self.sightings: dict[str, Sighting] = {}
        self.asked: list[str] = []
        #: the cap each `replacements` call was given
        self.caps: list[int] = []

    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        self.asked.append(signed.tx_hash)
        self._call("sighting", sender, str(asset.id), signed.tx_hash)
        return self.sightings.get(signed.tx_hash, Sighting.MISSING)

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        self.caps.append(cap_units)
        if self.resigns:
            return []
        body = json.loads(unsigned.body)
        rungs: list[Replacement] = []
        fee = unsigned.fee.native_units
        for n in range(1, self.bumps + 2):
            fee = fee * 5 // 4 + 1  # every rung over the one before by the chain's rule
            if fee > cap_units and not self.ignores_cap:
                break
            kind: Literal["bump", "cancel"] = "bump" if n <= self.bumps else "cancel"
            rung = {**body, "fee": fee, "kind": kind, "rung": n}
            if kind == "cancel":
                rung.update(to=body["from"], amount=0)
            unsigned_rung = self._unsigned(unsigned.transfer, FeeQuote(fee), rung)
            rungs.append(Replacement(kind, unsigned_rung, fee))
        return rungs

    def _accepted(self, tx_hash: str) -> None:
        if self.sightings.get(tx_hash, Sighting.MISSING) is Sighting.MISSING:
            self.sightings[tx_hash] = Sighting.PENDING

    def _status(self, tx_hash: str) -> str:
        seen = self.sightings.get(tx_hash, Sighting.MISSING)
        return {Sighting.SUCCESS: "success", Sighting.FAILED: "failed"}.get(seen, "pending")

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        if self.sightings.get(tx_hash, Sighting.MISSING) not in _HELD:
            self._call("lookup", address, str(asset.id), tx_hash)
            raise TransactionNotFound()  # the node does not hold it
        return await super().lookup(address, asset, tx_hash)


#: What a node holds and answers a lookup of.
_HELD = frozenset({Sighting.PENDING, Sighting.SUCCESS, Sighting.FAILED})


class ScanningFakeGateway(FakeGateway, DepositScanner):
    """A fake chain with blocks, a mempool and reorgs, for the deposit watch's rules.

    `pay(address, asset, units)` puts a credit in the mempool; `mine()` makes a block of
    what waits there; `reorg(depth)` drops the newest `depth` blocks (their credits back
    to the mempool, unless `drop=True`) and `mine()` builds the new branch; `fail_scan`
    makes the next `scan` calls raise. Hashes of a new branch differ from the old one's.
    """

    def __init__(self, chain: Chain, *, confirmations: int = 3, scan_span: int = 5, **options: Any):
        super().__init__(chain, **options)
        self.confirmations = confirmations
        self.scan_span = scan_span
        #: height -> (block, its credits); height 0 is the genesis block
        self.blocks: list[tuple[BlockRef, list[Incoming]]] = [(BlockRef(0, "b0"), [])]
        self.waiting: list[Incoming] = []
        self.reads_mempool = True
        self.fail_scan: list[BaseException] = []
        self.scans: list[tuple[int, int, int]] = []  # (first, last, addresses)
        self._branch = 0
        self._n = 0

    def pay(
        self, address: str, asset_id: int, units: int, *, position: str = "tx", tx_hash: str = ""
    ) -> Incoming:
        self._n += 1
        credit = Incoming(
            self.chain, tx_hash or f"tx{self._n}", position, address, asset_id, units, None
        )
        self.waiting.append(credit)
        return credit

    def mine(self, count: int = 1) -> BlockRef:
        for _ in range(count):
            height = len(self.blocks)
            ref = BlockRef(height, f"b{height}.{self._branch}")
            credits = [replace(c, block=ref) for c in self.waiting]
            self.waiting = []
            self.blocks.append((ref, credits))
        return self.blocks[-1][0]

    def reorg(self, depth: int, *, drop: bool = False) -> None:
        """The newest `depth` blocks leave the chain (its credits back to the mempool, or
        gone with `drop`); the next `mine` builds the new branch."""
        self._branch += 1
        gone = self.blocks[-depth:]
        del self.blocks[-depth:]
        if not drop:
            self.waiting = [replace(c, block=None) for _, cs in gone for c in cs] + self.waiting

    async def head(self) -> BlockRef:
        return self.blocks[-1][0]

    async def block(self, height: int) -> BlockRef | None:
        return self.blocks[height][0] if 0 <= height < len(self.blocks) else None

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        self.scans.append((first, last, len(addresses)))
        if self.fail_scan:
            raise self.fail_scan.pop(0)
        watched = set(addresses)
        return [
            c
            for _, credits in self.blocks[first : last + 1]
            for c in credits
            if c.address in watched
        ]

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        if not self.reads_mempool:
            return []
        watched = set(addresses)
        return [c for c in self.waiting if c.address in watched]

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        for ref, credits in self.blocks:
            if any(c.tx_hash == tx_hash for c in credits):
                return ref
        if any(c.tx_hash == tx_hash for c in self.waiting):
            return MEMPOOL
        return None


def fake_gateways(
    *, followed: bool = True, catalog: Catalog = CONTRACT_CATALOG, **options: Any
) -> dict[Chain, FakeGateway]:
    """One fake gateway per chain of `catalog` (`followed`: with the lifecycle; SOLANA and
    TRON re-sign), each built with `options`."""
    kind = FollowedFakeGateway if followed else FakeGateway
    return {chain: kind(chain, catalog=catalog, **options) for chain in catalog.chains}


__all__ = [
    "FAKE_FEES",
    "RESIGNING_CHAINS",
    "FakeGateway",
    "FollowedFakeGateway",
    "Outcome",
    "ScanningFakeGateway",
    "fake_gateways",
]
