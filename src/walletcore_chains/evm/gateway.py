"""`EvmGateway`: the `ChainGateway` of ETHEREUM, BSC and POLYGON over `AsyncWeb3`.

- balance: `eth_getBalance`, or the token's `balanceOf` (`eth_call`).
- fee: gas x max fee per gas. The max fee is 2 x the next base fee + the median tip of
  `eth_feeHistory` (the latest block's base fee and `eth_maxPriorityFeePerGas` when the node
  keeps no fee history), or the legacy `eth_gasPrice` on chains without EIP-1559. Gas:
  21,000 for the native coin, the token transfer's `eth_estimateGas` + 20% (100,000 when it
  cannot be estimated). A quote is binding: `prepare` divides it by the gas again, so the
  transaction can never cost more than quoted.
- PLATFORM fee payer: the sponsor signs a top-up of exactly the transfer's most gas cost to
  the sender, broadcast and mined first; then the sender's transfer. Its quote is both.
- nonces: `NonceBook` (one built-but-unbroadcast transaction per address, across every
  process on the Repo when the book has its leases; a failed sign, store or broadcast gives
  the nonce back).
- history: a bounded scan of the last `history_blocks` blocks (native) or the token's
  Transfer logs; it may lag a fresh broadcast. Production should plug an indexer.
- the lifecycle (`TransferFollower`, `walletcore_chains.evm.follow`): `sighting` reads one
  broadcast transfer (pending, success or failed at depth, missing, conflict); a transfer
  that does not confirm is replaced from a ladder signed with it (`replacements`: bumps of
  the same nonce, then a cancel to self), never re-signed (`resigns` False). A rung goes out
  through `broadcast` like any transfer, and never touches the `NonceBook`.
- deposits (`DepositScanner`, `walletcore_chains.evm.deposits.EvmScanner`): token Transfer
  logs over a range for every watched address at once, and each block's transactions
  (with their call traces when the node has a call tracer); `confirmations` is the chain's
  depth, `scan_span` its setting (500 blocks by default).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from eth_abi.abi import decode as abi_decode
from eth_abi.abi import encode as abi_encode
from eth_typing import HexStr
from eth_utils.address import to_checksum_address
from web3 import AsyncWeb3
from web3.exceptions import TimeExhausted
from web3.exceptions import TransactionNotFound as Web3NotFound

from walletcore.domain.assets import CONTRACT_ASSETS, Asset
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    BroadcastTimeout,
    DomainError,
    InsufficientFunds,
    InsufficientGas,
    InvalidRequest,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.ports import (
    AddressValidator,
    ChainGateway,
    CheckFailed,
    DepositScanner,
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    Unmined,
    UnsignedTransfer,
)
from walletcore_chains.evm import codec, errors, fees, follow
from walletcore_chains.evm.config import EvmConfig
from walletcore_chains.evm.deposits import EvmScanner
from walletcore_chains.evm.fees import NATIVE_GAS
from walletcore_chains.evm.history import History
from walletcore_chains.evm.nonces import NonceBook
from walletcore_chains.evm.rows import BALANCE_OF_SELECTOR

log = logging.getLogger(__name__)


class EvmGateway(ChainGateway, TransferFollower, DepositScanner):
    #: a transfer that cannot land is replaced from its pre-signed ladder, never re-signed
    #: (an EVM transaction does not expire: only another one with its nonce ends it)
    resigns = False

    def __init__(
        self,
        config: EvmConfig,
        w3: AsyncWeb3[Any],
        validator: AddressValidator,
        *,
        tokens: Mapping[int, str] | None = None,
        nonces: NonceBook | None = None,
        receipt_timeout: float = 120.0,
        assets: Iterable[Asset] | None = None,
    ) -> None:
        """`assets`: the chain's served assets (its coin, and the tokens whose deposits are
        scanned); by default the contract's assets of the chain."""
        self.chain = config.chain
        self.config = config
        self.w3 = w3
        self._validator = validator
        self._tokens = dict(config.tokens if tokens is None else tokens)
        self._nonces = nonces or NonceBook()
        self._receipt_timeout = receipt_timeout
        self._chain_id = config.chain_id
        #: the node's chain id, once it was asked and matched the network's
        self._chain_id_seen: int | None = None
        self._history = History(w3, config)
        #: seconds a broadcast may stay unmined before it counts as stuck (the chain's own,
        #: or `WALLETCORE_EVM_STUCK_AFTER_SECONDS`)
        self.stuck_after_seconds = float(config.stuck_after_seconds)
        served = [
            a for a in (CONTRACT_ASSETS if assets is None else assets) if a.chain == self.chain
        ]
        native = next((a for a in served if a.is_native), None)
        if native is None:
            raise ValueError(f"no native asset of {self.chain} among the assets given")
        scanned = {a.id for a in served if not a.is_native}
        #: the deposit scan (`DepositScanner`)
        self.scanner = EvmScanner(
            w3,
            self.chain,
            native.id,
            {i: c for i, c in self._tokens.items() if i in scanned or assets is None},
        )
        self.confirmations = config.confirmations
        self.scan_span = config.scan_span

    def __repr__(self) -> str:
        return f"EvmGateway({self.chain.value}, {self.config.network})"

    async def start(self) -> None:
        """Nothing to open: the provider connects on first use."""

    async def aclose(self) -> None:
        """Close the provider's HTTP sessions (an in-process provider has none)."""
        from web3 import AsyncHTTPProvider

        if isinstance(self.w3.provider, AsyncHTTPProvider):
            await self.w3.provider.disconnect()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the node answers `eth_blockNumber`, and serves the
        network's chain (its `eth_chainId`, asked until it once matched)."""
        try:
            await self._get_chain_id()
        except AssetUnavailableOnEndpoint as wrong:
            raise CheckFailed(f"wrong chain: {wrong.message.split(':', 1)[0]}") from None
        await self.w3.eth.block_number

    @property
    def nonces(self) -> NonceBook:
        return self._nonces

    def token_address(self, asset: Asset) -> str:
        contract = self._tokens.get(asset.id)
        if contract is None:
            raise AssetUnavailableOnEndpoint(
                f"{asset.symbol} has no contract on {self.chain} {self.config.network}; "
                "contact the operator"
            )
        return contract

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    async def balance(self, address: str, asset: Asset) -> int:
        try:
            if asset.is_native:
                return int(await self.w3.eth.get_balance(to_checksum_address(address)))
            data = BALANCE_OF_SELECTOR + abi_encode(["address"], [address])
            out = await self.w3.eth.call({"to": self.token_address(asset), "data": data})
            return int(abi_decode(["uint256"], bytes(out))[0])
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    async def history(self, address: str, asset: Asset, limit: int) -> list[Any]:
        contract = None if asset.is_native else self.token_address(asset)
        return await self._history.rows(address, contract, limit)

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> Any:
        contract = None if asset.is_native else self.token_address(asset)
        found = await self._history.lookup(address, contract, tx_hash)
        if found is None:
            raise TransactionNotFound()
        return found

    # -- fees ---------------------------------------------------------------------------
    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        try:
            max_fee, _ = await self._gas_price()
            gas = await self._gas(sender, recipient, asset, amount_units)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        if fee_payer is not None and fee_payer != sender:
            gas += NATIVE_GAS  # the sponsor's top-up
        return FeeQuote(gas * max_fee)

    async def _gas_price(self) -> tuple[int, int | None]:
        return await fees.gas_price(self.w3, self.config.eip1559)

    async def _gas(
        self, sender: str, recipient: str, asset: Asset, amount_units: int | None
    ) -> int:
        if asset.is_native:
            return NATIVE_GAS
        contract = self.token_address(asset)
        return await fees.token_gas(self.w3, sender, contract, recipient, amount_units or 1)

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        asset = transfer.asset
        if asset.chain != self.chain:
            raise ValueError(f"{asset.symbol} is not on {self.chain}")
        sponsored = transfer.fee_payer != transfer.sender
        try:
            chain_id = await self._get_chain_id()
            _, tip = await self._gas_price()
            gas = await self._gas(transfer.sender, transfer.recipient, asset, transfer.amount_units)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        max_fee = fee.native_units // (gas + (NATIVE_GAS if sponsored else 0))
        if asset.is_native:
            to, value, data = transfer.recipient, transfer.amount_units, b""
        else:
            to, value = self.token_address(asset), 0
            data = fees.transfer_data(transfer.recipient, transfer.amount_units)
        txs = []
        reserved: list[tuple[str, int]] = []
        try:
            for sender in (
                (transfer.sender, transfer.fee_payer) if sponsored else (transfer.sender,)
            ):
                nonce = await self._nonces.reserve(sender, self._pending_nonce(sender))
                reserved.append((sender, nonce))
        except BaseException:
            for address, nonce in reserved:
                await self._nonces.release(address, nonce)
            raise
        main = codec.EvmTx(
            transfer.sender,
            codec.tx_fields(chain_id, reserved[0][1], to, value, data, gas, max_fee, tip),
        )
        if sponsored:
            topup = codec.EvmTx(
                transfer.fee_payer,
                codec.tx_fields(
                    chain_id,
                    reserved[1][1],
                    transfer.sender,
                    gas * max_fee,
                    b"",
                    NATIVE_GAS,
                    max_fee,
                    tip,
                ),
            )
            txs = [topup, main]
        else:
            txs = [main]
        payloads = {t.sender: t.digest() for t in txs}
        return UnsignedTransfer(
            transfer, fee, main.digest(), codec.encode_body(txs), payloads=payloads
        )

    # -- operator: the nonce floor (`walletcore nonces`, docs/chains.md "Nonces") ----------
    async def nonce_status(self, address: str) -> dict[str, Any]:
        """Where the address's nonces stand: mined and pending by the node, and the floor
        this deployment stored (`waiting`: later sends wait behind a nonce the node lacks)."""
        account = self._stored_floors(address)
        floor = await self._nonces.floor(account)
        mined, pending = await self._mined_nonce(account), await self._pending_nonce(account)()
        return {
            "chain": self.chain.value,
            "network": self.config.network,
            "sequence": self._nonces.chain,
            "address": account,
            "mined": mined,
            "pending": pending,
            "floor": floor,
            "waiting": pending < floor,
        }

    async def reset_nonce_floor(self, address: str, next_nonce: int | None) -> dict[str, Any]:
        """Store `next_nonce` (default: the node's pending count) as the address's floor,
        between two sends. Never below the nonces already mined: those can never be reused."""
        account = self._stored_floors(address)
        mined = await self._mined_nonce(account)
        target = await self._pending_nonce(account)() if next_nonce is None else next_nonce
        if isinstance(target, bool) or not isinstance(target, int) or target < mined:
            raise InvalidRequest(
                f"the floor of {account} cannot go below {mined}: the node has mined nonces "
                f"0..{mined - 1} from it, and a mined nonce is never reused"
            )
        previous = await self._nonces.reset_floor(account, target)
        return {**await self.nonce_status(account), "previousFloor": previous}

    def _stored_floors(self, address: str) -> str:
        if self._nonces.leases is None:
            raise InvalidRequest(
                f"{self.chain.value} on {self.config.network} keeps its nonces in each process "
                "(no stored floors): nothing to show or reset"
            )
        return to_checksum_address(self.validate_address(address))

    async def _mined_nonce(self, address: str) -> int:
        try:
            return int(
                await self.w3.eth.get_transaction_count(to_checksum_address(address), "latest")
            )
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    def _pending_nonce(self, address: str) -> Any:
        async def read() -> int:
            try:
                return int(
                    await self.w3.eth.get_transaction_count(to_checksum_address(address), "pending")
                )
            except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
                raise errors.read_error(exc) from None

        return read

    async def _get_chain_id(self) -> int:
        """The chain id transactions are signed for: the network's, once the node was seen
        to serve it (a node on another chain, a dev node started without `--chain-id 1`
        say, would refuse every transaction, or take one meant for another chain); the
        node's own on a devnet. A mismatch is a 503 and nothing is signed."""
        if self._chain_id_seen is not None:
            return self._chain_id_seen
        node = int(await self.w3.eth.chain_id)
        if self._chain_id is not None and node != self._chain_id:
            raise AssetUnavailableOnEndpoint(
                f"the {self.chain.value} node serves chain id {node}, not {self._chain_id} "
                f"({self.config.network}): nothing was signed; contact the operator"
            )
        self._chain_id_seen = node
        return node

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        txs = codec.decode_body(unsigned.body)
        if set(signatures) != {t.sender for t in txs}:
            raise ValueError("one signature per signer is needed")
        signed = [
            codec.SignedTx(
                t.sender,
                t.nonce,
                t.signed(signatures[t.sender]),
                int(t.fields["value"]),
                t.replaces,
            )
            for t in txs
        ]
        return SignedTransfer(codec.encode_envelope(signed), signed[-1].tx_hash)

    async def release(self, unsigned: UnsignedTransfer) -> None:
        for tx in codec.decode_body(unsigned.body):
            if not tx.replaces:  # a rung's nonce was never the book's to give back
                await self._nonces.release(tx.sender, tx.nonce)

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            txs = codec.decode_envelope(signed.raw)
        except ValueError:
            raise TransferRejected("Transfer rejected by the network: malformed transaction")
        for index, tx in enumerate(txs):
            try:
                await self._send(tx)
                if index < len(txs) - 1:  # the top-up must be mined before the transfer
                    for later in txs[index + 1 :]:  # alive: their turn must outlast the wait
                        self._nonces.renew(
                            later.sender,
                            later.nonce,
                            self._receipt_timeout + self._nonces.lapse_seconds,
                        )
                    try:
                        await self.w3.eth.wait_for_transaction_receipt(
                            HexStr(tx.tx_hash), timeout=self._receipt_timeout, poll_latency=0.5
                        )
                    except TimeExhausted:  # the top-up went, the transfer not yet: unknown
                        log.warning(
                            "top-up %s not mined in %s s; its transfer waits for a retry",
                            tx.tx_hash,
                            self._receipt_timeout,
                        )
                        raise BroadcastTimeout() from None
            except BaseException:
                for later in txs[index + 1 :]:
                    await self._release(later)
                raise
        return txs[-1].tx_hash

    async def _send(self, tx: codec.SignedTx) -> None:
        try:
            await self.w3.eth.send_raw_transaction(tx.raw)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            meaning = errors.read_send_error(exc)
            try:
                if isinstance(meaning, errors.NonceUsed) and await self._known(tx.tx_hash):
                    meaning = errors.AlreadyKnown()
            except BaseException:
                await self._release(tx)
                raise
            if isinstance(meaning, errors.AlreadyKnown):
                await self._accepted(tx)
                return
            await self._release(tx)
            if isinstance(meaning, errors.NonceUsed):
                raise TransferRejected(
                    "Transfer rejected by the network: its nonce was used by another "
                    "transaction; nothing was sent"
                ) from None
            if isinstance(meaning, InsufficientFunds) and tx.value == 0:
                raise InsufficientGas(
                    f"Insufficient gas: the sender's {self.config.native_symbol} cannot pay "
                    "the transfer's gas; nothing was sent"
                ) from None
            if isinstance(meaning, DomainError):
                raise meaning from None
            raise BroadcastTimeout() from None  # timed out: the outcome is unknown
        await self._accepted(tx)

    async def _accepted(self, tx: codec.SignedTx) -> None:
        """The node took `tx` (or had it): the book's turn moves on. A rung's nonce was
        accepted with the transfer it replaces: nothing to tell the book."""
        if not tx.replaces:
            await self._nonces.accepted(tx.sender, tx.nonce)

    async def _release(self, tx: codec.SignedTx) -> None:
        """`tx` was not sent: its nonce is free again (never a rung's: see `_accepted`)."""
        if not tx.replaces:
            await self._nonces.release(tx.sender, tx.nonce)

    async def _known(self, tx_hash: str) -> bool:
        """Whether the node knows the transaction. When it cannot tell, the outcome of the
        broadcast is unknown: never answer "refused" for a transaction that may be mined."""
        try:
            await self.w3.eth.get_transaction(HexStr(tx_hash))
        except Web3NotFound:
            return False
        except Exception:  # noqa: BLE001 - cannot tell
            raise BroadcastTimeout() from None
        return True

    # -- deposits (`DepositScanner`, walletcore_chains.evm.deposits) ----------------------
    async def head(self) -> BlockRef:
        return await self.scanner.head()

    async def block(self, height: int) -> BlockRef | None:
        return await self.scanner.block(height)

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        return await self.scanner.scan(first, last, addresses)

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        return await self.scanner.mempool(addresses)

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        return await self.scanner.locate(tx_hash, last)

    # -- the lifecycle (`TransferFollower`, walletcore_chains.evm.follow) ----------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """What the node says of the transfer `signed` now: of its own transaction (the
        envelope's last; a sponsored transfer's top-up is not followed), at this chain's
        `confirmations` depth. `NodeUnavailable` when the node cannot answer."""
        main = codec.decode_envelope(signed.raw)[-1]
        try:
            return await follow.sighting(self.w3, self.config.confirmations, main, signed.tx_hash)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        """The ladder of `unsigned` (a transfer `prepare` built), offline: bumps of its own
        transaction, then a cancel to the sender itself, each costing at most `cap_units`
        (`follow.ladder`).

        A sponsored transfer (the sponsor's gas top-up, then the sender's transfer): the
        rungs replace the sender's transfer only, since the top-up is mined before the
        transfer is broadcast and a new top-up would need a sponsor nonce that cannot be
        known offline. So each rung is signed by the sender alone (its `transfer.fee_payer`
        is the sender, `signers` = (sender,)), and its gas comes from the sender's own coin:
        the top-up paid the transfer's first max fee, so a bump goes out only when the sender
        holds the difference too, and the node refuses it (`InsufficientGas`, nothing sent)
        when not."""
        txs = codec.decode_body(unsigned.body)
        main = txs[-1]
        transfer = unsigned.transfer
        if main.sender.lower() != transfer.sender.lower():
            raise ValueError("the transfer's own transaction is not the sender's")
        if transfer.fee_payer != transfer.sender:
            transfer = replace(transfer, fee_payer=transfer.sender)
        out: list[Replacement] = []
        for rung in follow.ladder(main, cap_units):
            built = UnsignedTransfer(
                transfer,
                FeeQuote(rung.fee_units),
                rung.tx.digest(),
                codec.encode_body([rung.tx]),
            )
            out.append(Replacement(rung.kind, built, rung.fee_units))
        return out


__all__ = ["EvmGateway"]
