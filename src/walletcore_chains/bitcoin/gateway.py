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
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.errors import (
    AddressUnknown,
    BroadcastTimeout,
    DomainError,
    InsufficientFunds,
    InvalidRequest,
    ServerError,
    ServiceUnavailable,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    AddressValidator,
    ChainGateway,
    FeeQuote,
    MinimumSends,
    Replacement,
    SendMinimum,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore_chains.bitcoin import errors, follow, spend, txcodec
from walletcore_chains.bitcoin.backend import (
    Backend,
    BackendFailure,
    BackendTimeout,
    BackendUnreachable,
    BroadcastRefused,
    Outspend,
    TxView,
    Utxo,
)
from walletcore_chains.bitcoin.coins import (
    CHANGE_DUST,
    P2WPKH_SCRIPT,
    NotEnough,
    dust_limit,
    fee_for,
)
from walletcore_chains.bitcoin.network import BitcoinNetwork
from walletcore_chains.bitcoin.scripts import is_witness, locking_script
from walletcore_chains.encodings import segwit_decode
from walletcore_chains.evm.nonces import NonceBook

log = logging.getLogger(__name__)

COINBASE_MATURITY = 100
#: how long this process keeps coins a broadcast spent out of its selections, when the
#: backend has not shown the spend yet (a lagging indexer, an unknown outcome)
RESERVE_SECONDS = 600.0
#: seconds pending before a send is `stuck` (and bumped), when not configured: a block is
#: ten minutes on average, an hour is six of them; regtest mines on demand
STUCK_AFTER_SECONDS = 3600.0
REGTEST_STUCK_AFTER_SECONDS = 30.0
#: a transaction has at most this many unconfirmed ancestors (the node's default limit)
_ANCESTOR_LIMIT = 25
#: BITCOIN's coin, as the plugin declares it (the contract's asset 1).
BTC = next(a for a in CONTRACT_ASSETS if a.chain == Chain.BITCOIN and a.is_native)


@dataclass(frozen=True)
class GatewayOptions:
    confirmations: int = 3
    fee_target: int = 3
    fallback_rate: float | None = None
    index_wait: float = 10.0
    #: seconds pending before a send is `stuck`; None: the network's default (one hour,
    #: 30 s on regtest)
    stuck_after: float | None = None

    @classmethod
    def of(cls, settings: Any, network: BitcoinNetwork) -> GatewayOptions:
        fallback = settings.bitcoin_fallback_fee_rate
        return cls(
            confirmations=settings.bitcoin_confirmations or network.confirmations,
            fee_target=settings.bitcoin_fee_target_blocks,
            fallback_rate=fallback,
            index_wait=settings.bitcoin_index_wait_seconds,
            stuck_after=settings.bitcoin_stuck_after_seconds,
        )


async def _first_turn() -> int:
    return 0


class BitcoinGateway(ChainGateway, TransferFollower, MinimumSends):
    chain = Chain.BITCOIN
    #: a Bitcoin transaction never expires: a stuck send is replaced from its ladder
    resigns = False

    def __init__(
        self,
        network: BitcoinNetwork,
        backend: Backend,
        validator: AddressValidator,
        nonces: NonceBook | None = None,
        options: GatewayOptions | None = None,
    ) -> None:
        self.network = network
        self.backend = backend
        self._validator = validator
        self._turns = nonces or NonceBook(lease=120.0)
        self.options = options or GatewayOptions(confirmations=network.confirmations)
        stuck = self.options.stuck_after
        if stuck is None:
            regtest = network.name == "regtest"
            stuck = REGTEST_STUCK_AFTER_SECONDS if regtest else STUCK_AFTER_SECONDS
        self.stuck_after_seconds: float = stuck
        #: outpoint -> until when this process keeps it out of selections
        self._reserved: dict[tuple[str, int], float] = {}
        #: txid -> the leases' turns its broadcast gives back
        self._held: dict[str, dict[str, int]] = {}

    def __repr__(self) -> str:
        return f"BitcoinGateway({self.network.name}, {self.backend.name})"

    async def start(self) -> None:
        """Nothing to open: the backend connects on first use."""

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the backend answers its tip height (Esplora
        `/blocks/tip/height`, Core `getblockcount`)."""
        await self.backend.tip_height()

    # -- addresses ----------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    def _script(self, address: str) -> tuple[int, bool]:
        """The length of the locking script the transaction will hold for an address, and
        whether it is a witness program (so the fee, the dust limit and the build agree)."""
        script = locking_script(self.network, address)
        return len(script), is_witness(script)

    @staticmethod
    def _native(asset: Asset) -> None:
        if asset.chain != Chain.BITCOIN or not asset.is_native:
            raise InvalidRequest(f"{asset.symbol} is not BITCOIN's coin")

    # -- coins --------------------------------------------------------------------------
    def _unreserve_spent(self, listed: list[Utxo]) -> None:
        now = time.monotonic()
        present = {(u.txid, u.vout) for u in listed}
        for outpoint, until in list(self._reserved.items()):
            if until < now or outpoint not in present:  # expired, or the backend saw it spent
                self._reserved.pop(outpoint, None)

    async def spendable(self, address: str) -> list[Utxo]:
        """Coins a send may use: confirmed and mature, or unconfirmed change of the
        wallet's own transactions; none that a recent broadcast of this process spent."""
        try:
            listed = await self.backend.utxos(address)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        self._unreserve_spent(listed)
        candidates = [u for u in listed if (u.txid, u.vout) not in self._reserved]
        young = [
            u for u in candidates if u.height is None or tip - u.height + 1 < COINBASE_MATURITY
        ]
        views: dict[str, TxView | None] = {}
        if young:
            txids = list(dict.fromkeys(u.txid for u in young))
            try:
                found = await asyncio.gather(*(self.backend.transaction(t) for t in txids))
            except BackendFailure as exc:
                raise errors.read_error(exc) from None
            views = dict(zip(txids, found, strict=True))
        out = []
        for coin in candidates:
            view = views.get(coin.txid)
            if coin.height is None:
                if view is None or not any(i.address == address for i in view.inputs):
                    continue  # received, unconfirmed: spendable once mined
            elif view is not None and view.coinbase:
                continue  # immature coinbase
            out.append(coin)
        return out

    # -- reads --------------------------------------------------------------------------
    async def balance(self, address: str, asset: Asset) -> int:
        self._native(asset)
        coins = await self.spendable(address)
        if not coins:
            try:
                known = await self.backend.address_known(address)
            except BackendFailure as exc:
                raise errors.read_error(exc) from None
            if not known:
                raise AddressUnknown()
        return sum(c.value for c in coins)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        self._native(asset)
        try:
            views = await self.backend.history(address, limit)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc, history=True) from None
        rows = [self._row(v, address, tip) for v in views]
        return [r for r in rows if r is not None][:limit]

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        self._native(asset)
        wanted = tx_hash.strip().lower()
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise TransactionNotFound()
        try:
            view = await self.backend.transaction(wanted)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        row = None if view is None else self._row(view, address, tip)
        if row is None:
            raise TransactionNotFound()
        return row

    def _row(self, view: TxView, address: str, tip: int) -> TxRow | None:
        paid = sum(i.value for i in view.inputs if i.address == address)
        received = sum(o.value for o in view.outputs if o.address == address)
        if paid:
            fee_payer = view.inputs[-1].address if view.inputs else None
            moved = paid - received - (view.fee if fee_payer == address else 0)
            kind, amount = "send", max(0, moved)
        elif received:
            kind, amount = "receive", received
        else:
            return None
        if view.conflicted:
            status = "failed"
        elif view.height is None:
            status = "pending"
        elif tip - view.height + 1 >= self.options.confirmations:
            status = "success"
        else:
            status = "pending"
        date = None
        if status == "success" and view.block_time is not None:
            date = datetime.fromtimestamp(view.block_time, UTC)
        return TxRow(view.txid, kind, amount, view.fee, status, date)

    # -- fees ---------------------------------------------------------------------------
    async def fee_rate(self) -> float:
        """sat/vB: the backend's estimate for `fee_target` blocks, at least the node's
        minimum relay fee."""
        try:
            estimate = await self.backend.fee_rate(self.options.fee_target)
            floor = await self.backend.min_fee_rate()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        if estimate is None:
            estimate = self.options.fallback_rate
        if estimate is None:
            if self.network.name != "regtest":
                raise ServiceUnavailable(
                    "No Bitcoin fee-rate estimate is available now; retry with backoff"
                )
            estimate = floor
        return max(estimate, floor)

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        self._native(asset)
        rate = await self.fee_rate()
        script, _ = self._script(recipient)
        sponsored = fee_payer is not None and fee_payer != sender
        if amount_units is None:
            outputs = [script, P2WPKH_SCRIPT] + ([P2WPKH_SCRIPT] if sponsored else [])
            return FeeQuote(fee_for(2 if sponsored else 1, outputs, rate))
        coins = await self.spendable(sender)
        sponsor_coins = await self.spendable(fee_payer) if sponsored and fee_payer else None
        try:
            units = spend.quote(coins, amount_units, script, rate, sponsor_coins=sponsor_coins)
        except NotEnough as exc:
            raise self._short(exc.available, amount_units) from None
        return FeeQuote(units)

    def _short(self, available: int, needed: int) -> InsufficientFunds:
        return InsufficientFunds(
            f"Insufficient BTC: the wallet's spendable coins hold {_btc(available)} BTC, the "
            f"send needs {_btc(needed)} BTC and its network fee (coins received count once "
            "mined)"
        )

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """The node's dust limit of the recipient's output (`dust_limit` of its locking
        script): an output worth less is not relayed, and `prepare` refuses to build it."""
        self._native(asset)
        script, witness = self._script(recipient)
        return SendMinimum(dust_limit(script, witness), "the dust limit of its address type")

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        self._native(transfer.asset)
        sponsor = transfer.fee_payer if transfer.fee_payer != transfer.sender else None
        turns: dict[str, int] = {}
        try:
            for owner in (transfer.sender, sponsor):
                if owner is not None:
                    turns[owner] = await self._turns.reserve(owner, _first_turn)
            body = await self._build(transfer, fee, sponsor, turns)
            payloads = txcodec.payloads(self.network, body)
        except BaseException:
            await self._give_back(turns)
            raise
        return UnsignedTransfer(
            transfer, fee, payloads[transfer.sender], body.encode(), payloads=payloads
        )

    async def _build(
        self, transfer: Transfer, fee: FeeQuote, sponsor: str | None, turns: dict[str, int]
    ) -> txcodec.Body:
        coins = await self.spendable(transfer.sender)
        sponsor_coins = await self.spendable(sponsor) if sponsor else None
        try:
            tip = await self.backend.tip_height()
            floor = await self.backend.min_fee_rate()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        script, witness = self._script(transfer.recipient)
        try:
            planned = spend.pay(
                coins,
                transfer.sender,
                transfer.recipient,
                dust_limit(script, witness),
                transfer.amount_units,
                fee.native_units,
                script,
                sponsor=sponsor,
                sponsor_coins=sponsor_coins,
            )
        except spend.TooSmall as exc:
            raise InvalidRequest(
                f"Amount too small: the recipient's output would be {_btc(exc.value)} BTC, "
                f"below the dust limit of {_btc(exc.limit)} BTC; nothing was sent"
            ) from None
        except spend.SponsorShort as exc:
            raise InsufficientFunds(
                f"Not enough BTC for the network fee: the platform wallet's spendable coins "
                f"hold {_btc(exc.available)} BTC, the fee is {_btc(fee.native_units)} BTC"
            ) from None
        except NotEnough as exc:
            raise self._short(exc.available, transfer.amount_units) from None
        needed = math.ceil(planned.vsize * floor)
        if planned.fee < needed:
            raise TransferRejected(
                "Transfer not sent: the quoted fee no longer covers the transaction's size at "
                "the network's minimum relay fee (the wallet's coins changed meanwhile); "
                "nothing was sent; request a new fee quote"
            )
        return txcodec.Body.of(self.network, planned, tip, turns)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        from walletcore_chains.bitcoin import address_of

        body = txcodec.Body.decode(unsigned.body)
        raw, txid = txcodec.assemble(self.network, body, signatures, address_of)
        if body.turns:  # a ladder's rungs hold no turn
            self._held[txid] = dict(body.turns)
        return SignedTransfer(raw, txid)

    async def release(self, unsigned: UnsignedTransfer) -> None:
        await self._give_back(txcodec.Body.decode(unsigned.body).turns)

    async def _give_back(self, turns: Mapping[str, int], *, sent: bool = False) -> None:
        """End the addresses' turns. The lease's floor (a nonce on the EVM chains) is never
        moved: a Bitcoin address has no sequence, only the turn matters."""
        for owner, turn in turns.items():
            await self._turns.release(owner, turn)

    def _parsed(self, raw: bytes) -> tuple[str, list[tuple[str, int]]]:
        """A signed transaction's txid and the coins it spends, from one parse."""
        from walletcore_chains import bclib

        tx = bclib.transactions().Transaction.parse_bytes(raw, network=self.network.bitcoinlib)
        return str(tx.txid), [(bytes(i.prev_txid).hex(), int(i.output_n_int)) for i in tx.inputs]

    async def broadcast(self, signed: SignedTransfer) -> str:
        turns = self._held.pop(signed.tx_hash, {})
        try:
            txid, spent = self._parsed(signed.raw)
        except Exception:  # noqa: BLE001 - not our bytes
            await self._give_back(turns)
            raise TransferRejected("Transfer rejected: malformed transaction") from None
        if txid != signed.tx_hash:
            await self._give_back(turns)
            raise ServerError(
                "The stored transaction does not match its hash; contact the operator"
            )
        until = time.monotonic() + RESERVE_SECONDS
        for outpoint in spent:
            self._reserved[outpoint] = until
        try:
            reported = await self._send(signed.raw, txid)
        except BaseException as exc:
            refused = isinstance(exc, DomainError) and (
                exc.status < 500 or isinstance(exc, TransferRejected | ServiceUnavailable)
            )
            if refused:  # nothing was sent: its coins are free again
                for outpoint in spent:
                    self._reserved.pop(outpoint, None)
            await self._give_back(turns)
            raise
        if reported != txid:
            log.error("the node reported txid %s for the transaction stored as %s", reported, txid)
            await self._give_back(turns)
            raise ServerError("The network reported another transaction hash; contact the operator")
        await self._seen(txid)
        await self._give_back(turns, sent=True)
        return txid

    async def _send(self, raw: bytes, txid: str) -> str:
        try:
            return await self.backend.broadcast(raw.hex())
        except BroadcastRefused as exc:
            meaning = errors.refusal(exc.reason)
        except BackendUnreachable:
            raise errors.unreachable_send() from None
        except BackendTimeout:
            raise BroadcastTimeout() from None
        except BackendFailure:  # an error answer we cannot read: the outcome is unknown
            raise BroadcastTimeout() from None
        if isinstance(meaning, errors.AlreadyKnown):
            return txid
        if isinstance(meaning, errors.Spent):
            try:
                known = await self.backend.transaction(txid)
            except BackendFailure:
                raise BroadcastTimeout() from None  # cannot tell whether it was ours
            if known is not None and not known.conflicted:
                return txid  # our transaction spent them: sent before
            raise errors.double_spend() from None
        assert isinstance(meaning, DomainError)
        raise meaning from None

    async def _seen(self, txid: str) -> None:
        """Wait (bounded) until the backend shows `txid`, so the next send from the address
        selects after it (its change in, its coins out)."""
        deadline = time.monotonic() + self.options.index_wait
        while True:
            try:
                if await self.backend.transaction(txid) is not None:
                    return
            except BackendFailure:
                pass
            if time.monotonic() >= deadline:
                log.warning(
                    "the Bitcoin backend does not show %s yet; its coins stay reserved", txid
                )
                return
            await asyncio.sleep(0.1)

    # -- lifecycle (`TransferFollower`, follow.py) ---------------------------------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """Mined: `success` at the gateway's depth, else `pending`; in the mempool:
        `pending`; unknown to the node: `conflict` when one of its coins is spent by
        another transaction (or its coin's transaction was replaced by a mined one), else
        `missing`. Node failures raise (503), never `missing`."""
        self._native(asset)
        txid = signed.tx_hash
        try:
            parsed_txid, spent = self._parsed(signed.raw)
            matches = parsed_txid == txid
        except Exception:  # noqa: BLE001 - not bytes this gateway made
            matches = False
        if not matches:
            raise ServerError(
                "The stored transaction does not match its hash; contact the operator"
            )
        try:
            await self.backend.watch(sender)  # Core: its wallet then remembers replacements
            seen = await self._sighted(txid)
            if seen is not None:
                return seen
            states: list[Outspend] = []
            for prev_txid, vout in spent:
                states.append(await self.backend.outspend(prev_txid, vout))
            if any(s.state == "spent" and s.spender == txid for s in states):
                return Sighting.PENDING  # the backend names it as the spender: it has it
            if any(s.state == "spent" for s in states):
                # it may have been mined (or entered the mempool) since it was looked up
                again = await self._sighted(txid)
                return Sighting.CONFLICT if again is None else again
            for (prev_txid, _), state in zip(spent, states, strict=True):
                if state.state == "unknown":
                    funding = await self.backend.transaction(prev_txid)
                    if funding is not None and funding.conflicted:
                        return Sighting.CONFLICT  # the coin it spends can never exist
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        return Sighting.MISSING

    async def _sighted(self, txid: str) -> Sighting | None:
        """What the backend says of a transaction it knows; None when it does not."""
        view = await self.backend.transaction(txid)
        if view is None:
            return None
        if view.conflicted:
            return Sighting.CONFLICT
        if view.height is None:
            return Sighting.PENDING
        tip = await self.backend.tip_height()
        deep = tip - view.height + 1 >= self.options.confirmations
        return Sighting.SUCCESS if deep else Sighting.PENDING

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> list[Replacement]:
        """The replace-by-fee ladder of a send `prepare` built (`follow.ladder`), offline:
        bumps out of the payer's change (the recipient's output when the whole balance
        was sent), then a cancel (the coins back to their owners); each costs at most
        `cap_units` sat and is signed like the send (`payload_for` each signer)."""
        if unsigned.transfer.asset.chain != Chain.BITCOIN:
            return []
        script, witness = self._script(unsigned.transfer.recipient)
        return follow.ladder(
            self.network,
            unsigned,
            cap_units,
            recipient_script=script,
            recipient_dust=dust_limit(script, witness),
        )

    async def prepare_cpfp(
        self,
        address: str,
        parent_txid: str,
        fee_rate_sat_vb: float | None = None,
        cap_units: int | None = None,
    ) -> UnsignedTransfer:
        """Child pays for parent: a transaction spending the outputs of the unconfirmed
        `parent_txid` that pay `address` (not yet spent) back to `address`, at the fee
        that brings the package (the parent with its unconfirmed ancestors, and the
        child) to `fee_rate_sat_vb` (default: the gateway's estimate for `fee_target`
        blocks). Signed by `address`'s key (`payload_for(address)`), put together by
        `assemble`, sent by `broadcast`. `InvalidRequest` when the parent is confirmed,
        unknown, replaced or pays nothing unspent to `address`; `TransferRejected` when
        the fee would exceed `cap_units` or the coins cannot pay it."""
        address = self.validate_address(address)
        decoded = segwit_decode(self.network.hrp, address)
        if decoded is None or decoded[0] != 0 or len(decoded[1]) != 20:
            raise InvalidRequest("Child-pays-for-parent spends a wallet's P2WPKH coins only")
        wanted = parent_txid.strip().lower() if isinstance(parent_txid, str) else ""
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise InvalidRequest("The parent transaction's id must be 64 hexadecimal digits")
        if fee_rate_sat_vb is not None and not (0 < fee_rate_sat_vb <= 100_000):
            raise InvalidRequest("The target fee rate must be above 0 sat/vB")
        try:
            await self.backend.watch(address)
            parent = await self.backend.transaction(wanted)
            if parent is None or parent.conflicted:
                raise InvalidRequest(
                    f"Transaction {wanted} is unknown to the network (or was replaced): "
                    "nothing to pay for"
                )
            if parent.height is not None:
                raise InvalidRequest(
                    f"Transaction {wanted} is confirmed already: nothing to speed up"
                )
            paying = [(i, o.value) for i, o in enumerate(parent.outputs) if o.address == address]
            if not paying:
                raise InvalidRequest(
                    f"Transaction {wanted} pays nothing to {address}: its key cannot speed it up"
                )
            coins = []
            for vout, value in paying:
                if (await self.backend.outspend(wanted, vout)).state == "unspent":
                    coins.append(Utxo(wanted, vout, value, None))
            if not coins:
                raise InvalidRequest(
                    f"The outputs of {wanted} to {address} are spent already (a child "
                    "transaction pays for it already)"
                )
            rate = fee_rate_sat_vb if fee_rate_sat_vb is not None else await self.fee_rate()
            floor = await self.backend.min_fee_rate()
            ancestors = await self._unconfirmed_ancestry(parent)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        if parent.vsize is None or any(size <= 0 for size, _ in ancestors):
            raise ServiceUnavailable("The chain node does not tell the transaction's size")
        size = follow.child_size(len(coins))
        fee = follow.cpfp_fee(
            rate, floor, size, (parent.vsize, parent.fee), follow.ancestry(ancestors)
        )
        total = sum(c.value for c in coins)
        if cap_units is not None and fee > cap_units:
            raise TransferRejected(
                f"Child-pays-for-parent not prepared: its fee of {_btc(fee)} BTC exceeds the "
                f"cap of {_btc(cap_units)} BTC; nothing was signed"
            )
        if total - fee < CHANGE_DUST:
            raise TransferRejected(
                f"Child-pays-for-parent not prepared: the coins received ({_btc(total)} BTC) "
                f"cannot pay its fee of {_btc(fee)} BTC; nothing was signed"
            )
        turns = {address: await self._turns.reserve(address, _first_turn)}
        try:
            body = txcodec.Body(
                self.network.name,
                tip,
                tuple((c, address) for c in coins),
                (spend.Output(address, total - fee),),
                fee,
                turns,
            )
            payloads = txcodec.payloads(self.network, body)
        except BaseException:
            await self._give_back(turns)
            raise
        # moves nothing: the wallet's own coins back to it (as the ladder's cancel)
        transfer = Transfer(BTC, address, address, 0, address)
        return UnsignedTransfer(
            transfer, FeeQuote(fee), payloads[address], body.encode(), payloads=payloads
        )

    async def _unconfirmed_ancestry(self, tx: TxView) -> list[tuple[int, int]]:
        """`(vsize, fee)` of `tx` and of each of its unconfirmed ancestors (at most the
        node's ancestor limit)."""
        known: dict[str, TxView | None] = {tx.txid: tx}
        queue = [tx]
        while queue and len(known) <= _ANCESTOR_LIMIT * 4:
            for txin in queue.pop().inputs:
                if txin.txid in known:
                    continue
                view = await self.backend.transaction(txin.txid)
                known[txin.txid] = view
                if view is not None and view.height is None:
                    queue.append(view)
        unconfirmed = [v for v in known.values() if v is not None and v.height is None]
        return [(v.vsize or 0, v.fee) for v in unconfirmed[: _ANCESTOR_LIMIT + 1]]


def _btc(units: int) -> str:
    from walletcore.domain.money import format_balance

    return format_balance(units, 8)


__all__ = ["BitcoinGateway", "GatewayOptions"]
