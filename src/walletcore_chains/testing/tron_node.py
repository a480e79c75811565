"""A TRON full node for the tests: java-tron's HTTP API (the part `TronGateway` uses) and
TronGrid's `/v1/accounts/...` history, on 127.0.0.1 (a free port) in a thread.

It keeps TRX balances, bandwidth (free daily, staked) and energy (staked) per account, and
runs TRC20 calls on a real EVM (py-evm: the TVM executes the same bytecode for a plain
token; `Token.vy`, deployed per asset), charging energy = the EVM's execution gas (gas used
minus the 21,000 + calldata intrinsic gas). `wallet/estimateenergy` answers, as java-tron,
the least energy limit the call succeeds with: more than it then uses when clearing
storage refunds energy.

Every broadcast (`wallet/broadcasthex`) is verified the way java-tron does, in its words:
a known txID (`DUP_TRANSACTION_ERROR`, "Dup transaction."), the reference block
(`TAPOS_ERROR`), the expiration (`TRANSACTION_EXPIRATION_ERROR`), the signature over the
txID = SHA-256 of the `raw_data` bytes as sent, recovering the owner (`SIGERROR`), the
bandwidth or TRX to pay for it (`BANDWITH_ERROR`, "Account resource insufficient error."),
then the contract (`CONTRACT_VALIDATE_ERROR`, "Contract validate error : ..."). Bandwidth
is java-tron's: the signed size + 64, from staked, else free bandwidth, else burned at
`getTransactionFee` (all or nothing); a TRX transfer creating an account burns
`getCreateAccountFee` (or staked bandwidth) plus `getCreateNewAccountFeeInSystemContract`.
A contract call may use min(staked energy left + balance / price, fee_limit / price) energy;
beyond it the call dies `OUT_OF_ENERGY` (all of it charged), a revert is `REVERT`; staked
energy is used first, the rest burned at `getEnergyFee`. A call may carry TRX (`call_value`,
paid to the contract when it succeeds); the calls a contract makes while running are its
receipt's `internal_transactions` (java-tron's shape with `vm.saveInternalTx` on: caller,
`transferTo_address`, `callValueInfo`, note `call`/`create`, `rejected` when it, a call
above it or the transaction failed), and the TRX they move is moved. `deploy_payer()`
deploys `PAYER_SOURCE`, a contract paying TRX or a token to several recipients in one call.

Each accepted transaction is a block of its own at once; blocks are solidified at once, or
only by `solidify()` when built with `auto_solidify=False`. The daily bandwidth window
never elapses (`reset_usage()` starts a new day). Blocks are read as java-tron gives them
(`getnowblock`, `getblockbynum`, `getblockbylimitnext`: at most `block_limit` = 100 blocks,
else `{}`; each with its `transactions`), and their receipts by `gettransactioninfobyblocknum`
(a JSON array, in the block's order). Not modelled: forks (a block once made stays),
SELFDESTRUCT's transfer, TRC10.

The transfer lifecycle (docs/tron.md, "Following a transfer"): with `auto_pack=False` an
accepted broadcast waits in the pending pool (`wallet/gettransactionfrompending` shows it,
`gettransactionbyid` does not, as on java-tron) until `pack()` puts each held transaction
in a block of its own (`together=True`: all in one new block), validating it again against
the new head as a block producer does (one that no longer validates, e.g. expired
meanwhile, is dropped). `drop_pending()` loses
held transactions as a node that evicted them (`remember=True`: the node still answers
`DUP_TRANSACTION_ERROR` to the same bytes, as java-tron's `transactionIdCache` does, without
taking them back). `advance(seconds)` produces an empty block that many seconds after the
head (time moves past an expiration); `walletsolidity/getnowblock` is the solidified head.
`broken` holds API paths that answer java-tron's servlet error (`{"Error": ...}`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from functools import cache
from typing import Any
from urllib.parse import parse_qs, urlparse

from eth_abi.abi import encode as abi_encode
from eth_keys.datatypes import Signature
from eth_utils.crypto import keccak

from walletcore.testing.http import LoopbackHttpServer
from walletcore_chains.tron import proto

PARAMETERS = {
    "getTransactionFee": 1_000,
    "getEnergyFee": 210,
    "getCreateAccountFee": 100_000,
    "getCreateNewAccountFeeInSystemContract": 1_000_000,
    "getFreeNetLimit": 600,
    "getTotalEnergyLimit": 180_000_000_000,
}
RESULT_RESERVE = 64
MAX_FEE_LIMIT = 15_000_000_000
#: java-tron's `GetBlockByLimitNextServlet.BLOCK_LIMIT_NUM`
BLOCK_LIMIT = 100
_MINT = keccak(b"mint(address,uint256)")[:4]
_RICH = 10**30


#: A contract for the tests (`TronTestNode.deploy_payer`): `pay` sends its call's TRX to
#: several recipients (internal transfers), `pay_token` moves a token from the caller to
#: several recipients (`transferFrom`: one Transfer log each, after its own `Paid` log),
#: `try_pay` calls its own `pay` and goes on when that fails (the calls it made rejected).
PAYER_SOURCE = """
# pragma version ~=0.4.0
from ethereum.ercs import IERC20

event Paid:
    payer: indexed(address)
    count: uint256


@external
@payable
def pay(recipients: DynArray[address, 8], amounts: DynArray[uint256, 8]):
    log Paid(payer=msg.sender, count=len(recipients))
    for i: uint256 in range(len(recipients), bound=8):
        send(recipients[i], amounts[i])


@external
def pay_token(token: IERC20, recipients: DynArray[address, 8], amounts: DynArray[uint256, 8]):
    log Paid(payer=msg.sender, count=len(recipients))
    for i: uint256 in range(len(recipients), bound=8):
        assert extcall token.transferFrom(msg.sender, recipients[i], amounts[i])


@external
@payable
def try_pay(recipients: DynArray[address, 8], amounts: DynArray[uint256, 8]) -> bool:
    return raw_call(
        self,
        abi_encode(recipients, amounts, method_id=method_id("pay(address[],uint256[])")),
        value=msg.value,
        revert_on_failure=False,
    )
"""
PAY = "pay(address[],uint256[])"
TRY_PAY = "try_pay(address[],uint256[])"
PAY_TOKEN = "pay_token(address,address[],uint256[])"


@cache
def payer_artifact() -> bytes:
    """`PAYER_SOURCE`'s deployment bytecode, compiled once per process."""
    import vyper  # type: ignore[import-untyped]

    out = vyper.compile_code(PAYER_SOURCE, output_formats=["bytecode"])
    return bytes.fromhex(str(out["bytecode"]).removeprefix("0x"))


def b58(raw21: bytes) -> str:
    from tronpy.keys import to_base58check_address  # type: ignore[import-untyped]

    return str(to_base58check_address(raw21.hex()))


def raw21(address: str) -> bytes:
    from tronpy.keys import to_raw_address

    return bytes(to_raw_address(address))


@dataclass
class Account:
    balance: int = 0
    free_used: int = 0
    net_limit: int = 0
    net_used: int = 0
    energy_limit: int = 0
    energy_used: int = 0
    created: int = field(default_factory=lambda: int(time.time() * 1000))


@dataclass
class Landed:
    tx: dict[str, Any]  # raw_data etc., addresses as raw bytes kept separately
    raw: proto.Raw
    raw_hex: str
    signature: str
    info: dict[str, Any]
    block: int
    ok: bool


class Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Held:
    """A transaction accepted into the pending pool, not yet in a block."""

    raw: proto.Raw
    raw_bytes: bytes
    signatures: list[bytes]
    size: int


@dataclass(frozen=True)
class Call:
    """A call a contract made while running (java-tron's internal transaction): from
    `caller` to `to` (21 bytes), `value` sun; `rejected` when it, a call above it or the
    transaction failed (nothing moved)."""

    caller: bytes
    to: bytes
    value: int
    note: str
    rejected: bool


def _internal_json(tx_id: str, n: int, call: Call) -> dict[str, Any]:
    """java-tron's `InternalTransaction` (`visible: false`): hex addresses, the note's
    bytes in hex, `callValueInfo` with the TRX value (empty at 0), `rejected` when true."""
    out: dict[str, Any] = {
        "hash": hashlib.sha256(bytes.fromhex(tx_id) + n.to_bytes(4)).hexdigest(),
        "caller_address": call.caller.hex(),
        "transferTo_address": call.to.hex(),
        "callValueInfo": [{"callValue": call.value} if call.value else {}],
        "note": call.note.encode().hex(),
    }
    if call.rejected:
        out["rejected"] = True
    return out


@dataclass(frozen=True)
class Ran:
    """A contract call run on the EVM."""

    result: str
    used: int
    output: bytes
    logs: list[dict[str, Any]]
    calls: list[Call]


def _internal_calls(computation: Any, *, rejected: bool) -> Iterator[Call]:
    """The calls `computation` made, depth first in the order they were made."""
    for child in computation.children:
        failed = rejected or child.is_error
        note = "create" if child.msg.is_create else "call"
        to = child.msg.storage_address if child.msg.is_create else child.msg.to
        yield Call(
            b"\x41" + bytes(child.msg.sender),
            b"\x41" + bytes(to),
            int(child.msg.value),
            note,
            failed,
        )
        yield from _internal_calls(child, rejected=failed)


class TronTestNode(LoopbackHttpServer):
    def __init__(
        self, *, auto_solidify: bool = True, estimate_energy: bool = True, auto_pack: bool = True
    ) -> None:
        self.params = dict(PARAMETERS)
        #: most blocks `wallet/getblockbylimitnext` answers at once (java-tron: 100)
        self.block_limit = BLOCK_LIMIT
        self.auto_solidify = auto_solidify
        self.estimate_energy = estimate_energy
        #: False: accepted broadcasts wait in `pending` until `pack()`
        self.auto_pack = auto_pack
        self.pending: dict[str, Held] = {}
        #: txIDs answered `DUP_TRANSACTION_ERROR` though held no more (`drop_pending(remember=True)`)
        self.remembered: set[str] = set()
        #: API paths (e.g. "/wallet/gettransactioninfobyid") answering a servlet error
        self.broken: set[str] = set()
        self.accounts: dict[bytes, Account] = {}
        self.landed: dict[str, Landed] = {}
        self.order: list[str] = []
        #: every broadcast the node was asked for, and every path asked, in order
        self.broadcasts: list[str] = []
        self.paths: list[str] = []
        #: headers of the last request (the API key is checked by the tests)
        self.last_headers: dict[str, str] = {}
        self.blocks: list[tuple[int, bytes, int]] = []
        #: block number -> the txIDs it holds, in order
        self.block_txs: dict[int, list[str]] = {}
        self.solid = 0
        self._lock = threading.RLock()
        self._evm_setup()
        self._new_block()
        super().__init__()

    # -- the EVM (TRC20) ------------------------------------------------------------------
    def _evm_setup(self) -> None:
        from eth_tester import EthereumTester, PyEVMBackend  # type: ignore[import-untyped]

        from walletcore_chains.evm.devnet import token_artifact

        self._backend = PyEVMBackend()
        self._tester = EthereumTester(self._backend)
        self._funder = self._tester.get_accounts()[0]
        _, bytecode = token_artifact()
        #: asset id -> the token's `T...` address
        self.tokens: dict[int, str] = {}
        for asset_id, symbol in ((41, "USDT"), (42, "USDC")):
            args = abi_encode(["string", "string", "uint8"], [f"Loopback {symbol}", symbol, 6])
            tx_hash = self._tester.send_transaction(
                {"from": self._funder, "data": "0x" + (bytecode + args).hex(), "gas": 3_000_000}
            )
            contract = self._tester.get_transaction_receipt(tx_hash)["contract_address"]
            self.tokens[asset_id] = b58(b"\x41" + bytes.fromhex(contract[2:]))

    def _evm_run(
        self,
        owner: bytes,
        contract: bytes,
        data: bytes,
        energy_limit: int,
        *,
        commit: bool,
        value: int = 0,
    ) -> Ran:
        """What a call of `contract` by `owner` (sending `value` sun) does on the EVM."""
        from eth.exceptions import OutOfGas, Revert
        from eth.vm.spoof import SpoofTransaction

        chain = self._backend.chain
        sender, target = owner[1:], contract[1:]
        vm = chain.get_vm()
        state = vm.state
        if not state.get_code(target):
            raise Refused("CONTRACT_VALIDATE_ERROR", "No contract or not a valid smart contract")
        state.set_balance(sender, _RICH + value)
        intrinsic = 21_000 + sum(4 if b == 0 else 16 for b in data)
        price = int(state.base_fee) + 1
        tx = vm.create_unsigned_transaction(
            nonce=state.get_nonce(sender),
            gas_price=price,
            gas=intrinsic + energy_limit,
            to=target,
            value=value,
            data=data,
        )
        computation = state.apply_transaction(SpoofTransaction(tx, from_=sender))
        paid = value if computation.is_success else 0
        used = (_RICH + value - paid - state.get_balance(sender)) // price - intrinsic
        if computation.is_success:
            result = "SUCCESS"
        elif isinstance(computation.error, Revert):
            result = "REVERT"
        else:
            result = "OUT_OF_ENERGY" if isinstance(computation.error, OutOfGas) else "OUT_OF_TIME"
            used = energy_limit
        logs = [
            {
                "address": address.hex(),
                "topics": [t.to_bytes(32).hex() for t in topics],
                "data": payload.hex(),
            }
            for address, topics, payload in (
                computation.get_log_entries() if computation.is_success else []
            )
        ]
        if commit:
            state.persist()
            chain.header = chain.header.copy(state_root=state.state_root)
            chain.mine_block()
        calls = list(_internal_calls(computation, rejected=not computation.is_success))
        return Ran(result, used, bytes(computation.output), logs, calls)

    # -- test helpers ---------------------------------------------------------------------
    def fund(self, address: str, sun: int) -> None:
        with self._lock:
            self.accounts.setdefault(raw21(address), Account()).balance += sun

    def fund_token(self, address: str, asset_id: int, units: int) -> None:
        with self._lock:
            data = _MINT + abi_encode(
                ["address", "uint256"], ["0x" + raw21(address)[1:].hex(), units]
            )
            contract = "0x" + raw21(self.tokens[asset_id])[1:].hex()
            self._tester.send_transaction(
                {"from": self._funder, "to": contract, "data": "0x" + data.hex(), "gas": 200_000}
            )

    def deploy_payer(self) -> str:
        """Deploy `PAYER_SOURCE`: a contract paying TRX (its call's value) or a
        token to several recipients in one call. Returns its `T...` address."""
        with self._lock:
            tx_hash = self._tester.send_transaction(
                {"from": self._funder, "data": "0x" + payer_artifact().hex(), "gas": 3_000_000}
            )
            contract = self._tester.get_transaction_receipt(tx_hash)["contract_address"]
            raw = b"\x41" + bytes.fromhex(contract[2:])
            self.accounts.setdefault(raw, Account())
            return b58(raw)

    def token_balance(self, address: str, asset_id: int) -> int:
        data = keccak(b"balanceOf(address)")[:4] + abi_encode(
            ["address"], ["0x" + raw21(address)[1:].hex()]
        )
        with self._lock:
            ran = self._evm_run(
                raw21(address), raw21(self.tokens[asset_id]), data, 10**7, commit=False
            )
        return int.from_bytes(ran.output or b"\0")

    def stake(self, address: str, *, bandwidth: int = 0, energy: int = 0) -> None:
        """Staked (Stake 2.0) bandwidth and energy of the account, as limits."""
        with self._lock:
            account = self.accounts.setdefault(raw21(address), Account())
            account.net_limit, account.energy_limit = bandwidth, energy

    def reset_usage(self) -> None:
        with self._lock:
            for account in self.accounts.values():
                account.free_used = account.net_used = account.energy_used = 0

    def balance(self, address: str) -> int:
        account = self.accounts.get(raw21(address))
        return account.balance if account else 0

    def solidify(self) -> None:
        with self._lock:
            self.solid = self.blocks[-1][0]

    def info(self, tx_id: str) -> dict[str, Any]:
        return self.landed[tx_id].info

    def head_time(self) -> int:
        """The head block's timestamp (ms)."""
        return self.blocks[-1][2]

    def advance(self, seconds: float) -> int:
        """Produce an empty block `seconds` after the head (later blocks follow it): the
        chain's time moves on, past an expiration. Returns the block's number."""
        with self._lock:
            return self._new_block(at=self.blocks[-1][2] + int(seconds * 1000))

    def pack(self, *, together: bool = False) -> list[str]:
        """Put each held transaction in a block of its own (`together`: all in one new
        block), in the order they came, each validated again against the head then (a
        producer drops one that no longer validates: expired, or its TRX spent meanwhile).
        Returns the txIDs that landed."""
        with self._lock:
            held, self.pending = self.pending, {}
            landed: list[str] = []
            block: int | None = None
            for tx_id, tx in held.items():
                try:
                    if together and block is None:
                        self._accept(
                            tx.raw, tx.raw_bytes, tx.signatures, tx.size, tx_id, check_only=True
                        )
                        block = self._new_block()
                    self._accept(tx.raw, tx.raw_bytes, tx.signatures, tx.size, tx_id, block=block)
                except Refused:
                    continue
                landed.append(tx_id)
            return landed

    def drop_pending(self, tx_id: str | None = None, *, remember: bool = False) -> list[str]:
        """Lose held transactions before any block has them (`tx_id`, else all), as a node
        that evicted them; `remember`: still answer `DUP_TRANSACTION_ERROR` to their bytes
        (java-tron's `transactionIdCache`) instead of taking them back. Returns the txIDs."""
        with self._lock:
            gone = [t for t in self.pending if tx_id is None or t == tx_id]
            for t in gone:
                del self.pending[t]
            if remember:
                self.remembered.update(gone)
            return gone

    # -- blocks ---------------------------------------------------------------------------
    def _new_block(self, at: int | None = None) -> int:
        number = len(self.blocks)
        parent = self.blocks[-1][1] if self.blocks else b"\0" * 32
        stamp = max(
            int(time.time() * 1000) if at is None else at,
            (self.blocks[-1][2] + 1) if self.blocks else 0,
        )
        digest = hashlib.sha256(parent + number.to_bytes(8) + stamp.to_bytes(8)).digest()
        block_id = number.to_bytes(8) + digest[8:]
        self.blocks.append((number, block_id, stamp))
        if self.auto_solidify:
            self.solid = number
        return number

    # -- the API --------------------------------------------------------------------------
    def answer(self, path: str, body: dict[str, Any]) -> Any:
        handler = getattr(self, "_" + path.strip("/").replace("/", "_"), None)
        if handler is None:
            raise KeyError(path)
        if path in self.broken:
            raise RuntimeError("the node failed")
        with self._lock:
            return handler(body)

    def _wallet_getaccount(self, body: dict[str, Any]) -> dict[str, Any]:
        address = raw21(body["address"])
        account = self.accounts.get(address)
        if account is None:
            return {}
        out: dict[str, Any] = {"address": b58(address) if body.get("visible") else address.hex()}
        if account.balance:
            out["balance"] = account.balance
        out["create_time"] = account.created
        return out

    def _wallet_getaccountresource(self, body: dict[str, Any]) -> dict[str, Any]:
        account = self.accounts.get(raw21(body["address"]))
        if account is None:
            return {}
        values = {
            "freeNetUsed": account.free_used,
            "freeNetLimit": self.params["getFreeNetLimit"],
            "NetUsed": account.net_used,
            "NetLimit": account.net_limit,
            "EnergyUsed": account.energy_used,
            "EnergyLimit": account.energy_limit,
            "TotalNetLimit": 43_200_000_000,
            "TotalEnergyLimit": self.params["getTotalEnergyLimit"],
        }
        return {k: v for k, v in values.items() if v}

    def _wallet_getchainparameters(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "chainParameter": [
                {"key": k, "value": v} if v else {"key": k} for k, v in self.params.items()
            ]
        }

    def _wallet_getnowblock(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._block_json(self.blocks[-1], visible=bool(body.get("visible")))

    def _walletsolidity_getnowblock(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._block_json(self.blocks[self.solid], visible=bool(body.get("visible")))

    def _block_json(
        self, block: tuple[int, bytes, int], *, visible: bool = False
    ) -> dict[str, Any]:
        """java-tron's block: `blockID`, the header (`number` left out at 0, as protobuf's
        JSON does), and `transactions` when it holds any."""
        number, block_id, stamp = block
        witness = b"\x41" + hashlib.sha256(b"witness").digest()[:20]
        header = {
            "number": number,
            "txTrieRoot": hashlib.sha256(
                "".join(self.block_txs.get(number, [])).encode()
            ).hexdigest(),
            "witness_address": b58(witness) if visible else witness.hex(),
            "parentHash": self.blocks[max(0, number - 1)][1].hex(),
            "version": 31,
            "timestamp": stamp,
        }
        if not number:
            header.pop("number")
        out: dict[str, Any] = {
            "blockID": block_id.hex(),
            "block_header": {
                "raw_data": header,
                "witness_signature": hashlib.sha256(block_id).hexdigest() * 2 + "00",
            },
        }
        txs = self.block_txs.get(number)
        if txs:
            out["transactions"] = [self._tx_json(self.landed[t], visible=visible) for t in txs]
        return out

    def _wallet_getblockbynum(self, body: dict[str, Any]) -> dict[str, Any]:
        number = int(body.get("num", 0))
        if not 0 <= number < len(self.blocks):
            return {}
        return self._block_json(self.blocks[number], visible=bool(body.get("visible")))

    def _wallet_getblockbylimitnext(self, body: dict[str, Any]) -> dict[str, Any]:
        """Blocks `startNum` to `endNum` - 1, at most `BLOCK_LIMIT` of them (java-tron's
        `GetBlockByLimitNextServlet`: a larger range answers `{}`); those above the head
        are left out."""
        start, end = int(body.get("startNum", 0)), int(body.get("endNum", 0))
        if not (end > 0 and end > start and end - start <= self.block_limit):
            return {}
        visible = bool(body.get("visible"))
        return {
            "block": [
                self._block_json(b, visible=visible) for b in self.blocks[max(0, start) : end]
            ]
        }

    def _wallet_gettransactioninfobyblocknum(self, body: dict[str, Any]) -> Any:
        """Every transaction's receipt in the block, in the block's order: a JSON array (an
        empty one above the head), `{}` for block 0 (java-tron's servlet)."""
        number = int(body.get("num", 0))
        if number <= 0:
            return {}
        return [self.landed[t].info for t in self.block_txs.get(number, [])]

    def _call(self, body: dict[str, Any]) -> tuple[str, int, bytes]:
        owner, contract = raw21(body["owner_address"]), raw21(body["contract_address"])
        data = keccak(text=str(body["function_selector"]))[:4] + bytes.fromhex(
            str(body.get("parameter", ""))
        )
        ran = self._evm_run(owner, contract, data, 10**8, commit=False)
        return ran.result, ran.used, ran.output

    def _wallet_triggerconstantcontract(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            result, used, output = self._call(body)
        except Refused as refused:
            return {"result": {"code": refused.code, "message": refused.message}}
        answer: dict[str, Any] = {
            "energy_used": used,
            "constant_result": [output.hex()],
            "transaction": {"ret": [{}]},
        }
        if result == "SUCCESS":
            answer["result"] = {"result": True}
        else:
            answer["result"] = {"code": "CONTRACT_EXE_ERROR", "message": "REVERT opcode executed"}
        return answer

    def _wallet_estimateenergy(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.estimate_energy:
            return {
                "result": {
                    "code": "OTHER_ERROR",
                    "message": "this node does not support estimate energy",
                }
            }
        try:
            result, used, _ = self._call(body)
        except Refused as refused:
            return {"result": {"code": refused.code, "message": refused.message}}
        if result != "SUCCESS":
            return {"result": {"code": "CONTRACT_EXE_ERROR", "message": "REVERT opcode executed"}}
        return {"result": {"result": True}, "energy_required": self._required(body, used)}

    def _required(self, body: dict[str, Any], used: int) -> int:
        """java-tron's `energy_required`: the least energy limit the call succeeds with
        (a binary search), more than it uses when storage it clears refunds energy at
        the end (a transfer emptying the sender's balance)."""
        owner, contract = raw21(body["owner_address"]), raw21(body["contract_address"])
        data = keccak(text=str(body["function_selector"]))[:4] + bytes.fromhex(
            str(body.get("parameter", ""))
        )
        low, high = used, 2 * used + 50_000  # `used` is enough unless a refund came back
        while low < high:
            middle = (low + high) // 2
            ran = self._evm_run(owner, contract, data, middle, commit=False)
            if ran.result == "SUCCESS":
                high = middle
            else:
                low = middle + 1
        return low

    def _wallet_gettransactionbyid(self, body: dict[str, Any]) -> dict[str, Any]:
        landed = self.landed.get(str(body.get("value", "")))
        return {} if landed is None else self._tx_json(landed, visible=bool(body.get("visible")))

    def _wallet_gettransactionfrompending(self, body: dict[str, Any]) -> dict[str, Any]:
        tx_id = str(body.get("value", ""))
        held = self.pending.get(tx_id)
        if held is None:
            return {}
        return {
            "txID": tx_id,
            "raw_data_hex": held.raw_bytes.hex(),
            "signature": [s.hex() for s in held.signatures],
        }

    def _wallet_gettransactioninfobyid(self, body: dict[str, Any]) -> dict[str, Any]:
        landed = self.landed.get(str(body.get("value", "")))
        return {} if landed is None else landed.info

    def _walletsolidity_gettransactioninfobyid(self, body: dict[str, Any]) -> dict[str, Any]:
        landed = self.landed.get(str(body.get("value", "")))
        return {} if landed is None or landed.block > self.solid else landed.info

    def _tx_json(self, landed: Landed, *, visible: bool) -> dict[str, Any]:
        raw, contract = landed.raw, landed.raw.contract
        show = b58 if visible else (lambda a: a.hex())
        if contract.kind == proto.TRANSFER:
            value: dict[str, Any] = {
                "amount": contract.amount,
                "owner_address": show(contract.owner),
                "to_address": show(contract.to),
            }
        else:
            value = {
                "data": contract.data.hex(),
                "owner_address": show(contract.owner),
                "contract_address": show(contract.to),
            }
            if contract.amount:
                value["call_value"] = contract.amount
        raw_data: dict[str, Any] = {
            "contract": [
                {
                    "parameter": {
                        "value": value,
                        "type_url": "type.googleapis.com/protocol." + contract.kind,
                    },
                    "type": contract.kind,
                }
            ],
            "ref_block_bytes": raw.ref_block_bytes.hex(),
            "ref_block_hash": raw.ref_block_hash.hex(),
            "expiration": raw.expiration,
            "timestamp": raw.timestamp,
        }
        if raw.fee_limit:
            raw_data["fee_limit"] = raw.fee_limit
        ret = "SUCCESS" if landed.ok else (landed.info.get("receipt") or {}).get("result", "REVERT")
        return {
            "ret": [{"contractRet": ret}],
            "signature": [landed.signature],
            "txID": landed.info["id"],
            "raw_data": raw_data,
            "raw_data_hex": landed.raw_hex,
        }

    # -- TronGrid's history -----------------------------------------------------------------
    def grid(self, path: str, query: dict[str, list[str]]) -> dict[str, Any]:
        parts = path.strip("/").split("/")  # v1 accounts <address> transactions [trc20]
        with self._lock:
            address = raw21(parts[2])
            limit = int(query.get("limit", ["20"])[0])
            confirmed = query.get("only_confirmed", ["false"])[0] == "true"
            picked = [
                self.landed[t]
                for t in reversed(self.order)
                if not confirmed or self.landed[t].block <= self.solid
            ]
            if len(parts) == 5 and parts[4] == "trc20":
                wanted = query.get("contract_address", [None])[0]
                return {
                    "data": self._trc20_rows(address, picked, wanted)[:limit],
                    "success": True,
                    "meta": {"at": int(time.time() * 1000), "page_size": limit},
                }
            mine = [
                landed
                for landed in picked
                if address in (landed.raw.contract.owner, landed.raw.contract.to)
            ]
            start = int(query.get("fingerprint", ["0"])[0])
            page = mine[start : start + limit]
            meta: dict[str, Any] = {"at": int(time.time() * 1000), "page_size": len(page)}
            if start + limit < len(mine):
                meta["fingerprint"] = str(start + limit)
            data = []
            for landed in page:
                item = self._tx_json(landed, visible=False)
                receipt = landed.info.get("receipt") or {}
                item["ret"][0]["fee"] = landed.info.get("fee", 0)
                item.update(
                    blockNumber=landed.block,
                    block_timestamp=landed.info["blockTimeStamp"],
                    net_usage=receipt.get("net_usage", 0),
                    net_fee=receipt.get("net_fee", 0),
                    energy_fee=receipt.get("energy_fee", 0),
                    energy_usage_total=receipt.get("energy_usage_total", 0),
                    internal_transactions=[],
                )
                data.append(item)
            return {"data": data, "success": True, "meta": meta}

    def _trc20_rows(
        self, address: bytes, picked: list[Landed], wanted: str | None
    ) -> list[dict[str, Any]]:
        rows = []
        symbols = {
            b58(raw21(t)): (i, s)
            for i, s, t in ((41, "USDT", self.tokens[41]), (42, "USDC", self.tokens[42]))
        }
        for landed in picked:
            for log in landed.info.get("log", []):
                token = b58(b"\x41" + bytes.fromhex(log["address"]))
                if wanted and token != wanted:
                    continue
                sender = b"\x41" + bytes.fromhex(log["topics"][1])[-20:]
                to = b"\x41" + bytes.fromhex(log["topics"][2])[-20:]
                if address not in (sender, to):
                    continue
                rows.append(
                    {
                        "transaction_id": landed.info["id"],
                        "token_info": {
                            "symbol": symbols[token][1],
                            "address": token,
                            "decimals": 6,
                            "name": symbols[token][1],
                        },
                        "block_timestamp": landed.info["blockTimeStamp"],
                        "from": b58(sender),
                        "to": b58(to),
                        "type": "Transfer",
                        "value": str(int(log["data"], 16)),
                    }
                )
        return rows

    # -- broadcast ------------------------------------------------------------------------
    def _wallet_broadcasthex(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            signed = bytes.fromhex(str(body["transaction"]))
            raw_bytes, signatures = proto.split_signed(signed)
            raw = proto.Raw.decode(raw_bytes)
        except (KeyError, ValueError) as exc:
            return {"Error": f"class com.google.protobuf.InvalidProtocolBufferException : {exc}"}
        tx_id = proto.txid(raw_bytes)
        self.broadcasts.append(tx_id)
        try:
            if tx_id in self.pending or tx_id in self.remembered:
                raise Refused("DUP_TRANSACTION_ERROR", "Dup transaction.")
            held = not self.auto_pack
            self._accept(raw, raw_bytes, signatures, len(signed), tx_id, check_only=held)
            if held:
                self.pending[tx_id] = Held(raw, raw_bytes, signatures, len(signed))
        except Refused as refused:
            return {
                "result": False,
                "code": refused.code,
                "txid": tx_id,
                "message": refused.message,
            }
        return {
            "result": True,
            "code": "SUCCESS",
            "message": "",
            "txid": tx_id,
            "transaction": "{}",
        }

    def _accept(
        self,
        raw: proto.Raw,
        raw_bytes: bytes,
        signatures: list[bytes],
        size: int,
        tx_id: str,
        *,
        check_only: bool = False,
        block: int | None = None,
    ) -> int:
        """Validate the transaction against the head and land it in a block of its own
        (`block`: in that block, the head); `check_only`: validate only (a transaction taken
        into the pending pool). Returns the block's number."""
        if tx_id in self.landed:
            raise Refused("DUP_TRANSACTION_ERROR", "Dup transaction.")
        if not any(
            raw.ref_block_bytes == n.to_bytes(8)[6:8] and raw.ref_block_hash == b[8:16]
            for n, b, _ in self.blocks
        ):
            raise Refused("TAPOS_ERROR", "Tapos check error.")
        head_time = self.blocks[-1][2]
        if raw.expiration <= head_time or raw.expiration > head_time + 86_400_000:
            raise Refused("TRANSACTION_EXPIRATION_ERROR", "Transaction expired")
        contract = raw.contract
        if len(signatures) != 1 or not self._signed_by(tx_id, signatures[0], contract.owner):
            raise Refused("SIGERROR", "Validate signature error: miss sig or contract")
        owner = self.accounts.get(contract.owner)
        if owner is None:
            raise Refused(
                "CONTRACT_VALIDATE_ERROR",
                f"Contract validate error : account [{b58(contract.owner)}] does not exist",
            )
        bandwidth = size + RESULT_RESERVE
        creates = contract.kind == proto.TRANSFER and contract.to not in self.accounts
        receipt: dict[str, Any] = {}
        # bandwidth: staked, else free, else burned (a new account: its own fee)
        staked_left = max(0, owner.net_limit - owner.net_used)
        free_left = max(0, self.params["getFreeNetLimit"] - owner.free_used)
        burn, use_staked, use_free = 0, False, False
        if creates:
            if staked_left >= bandwidth:
                use_staked = True
            else:
                burn = self.params["getCreateAccountFee"]
        elif staked_left >= bandwidth:
            use_staked = True
        elif free_left >= bandwidth:
            use_free = True
        else:
            burn = bandwidth * self.params["getTransactionFee"]
        if owner.balance < burn:
            raise Refused("BANDWITH_ERROR", "Account resource insufficient error.")
        activation = self.params["getCreateNewAccountFeeInSystemContract"] if creates else 0
        if contract.kind == proto.TRANSFER:
            if contract.amount <= 0:
                raise Refused(
                    "CONTRACT_VALIDATE_ERROR",
                    "Contract validate error : Amount must be greater than 0.",
                )
            if contract.to == contract.owner:
                raise Refused(
                    "CONTRACT_VALIDATE_ERROR",
                    "Contract validate error : Cannot transfer TRX to yourself.",
                )
            if owner.balance - burn < contract.amount + activation:
                raise Refused(
                    "CONTRACT_VALIDATE_ERROR",
                    "Contract validate error : Validate TransferContract error, balance is not sufficient.",
                )
        elif not 0 <= raw.fee_limit <= MAX_FEE_LIMIT:
            raise Refused(
                "CONTRACT_VALIDATE_ERROR",
                "Contract validate error : feeLimit must be >= 0 and <= 15000000000",
            )
        elif owner.balance - burn < contract.amount:  # the call value
            raise Refused(
                "CONTRACT_VALIDATE_ERROR",
                "Contract validate error : Validate InternalTransfer error, balance is not "
                "sufficient.",
            )
        if check_only:
            return -1
        # accepted: charge bandwidth, run the contract
        if use_staked:
            owner.net_used += bandwidth
        elif use_free:
            owner.free_used += bandwidth
        owner.balance -= burn
        if burn:
            receipt["net_fee"] = burn
        else:
            receipt["net_usage"] = bandwidth
        fee = burn + activation
        info: dict[str, Any] = {"id": tx_id}
        ok = True
        if contract.kind == proto.TRANSFER:
            owner.balance -= contract.amount + activation
            self.accounts.setdefault(contract.to, Account()).balance += contract.amount
        else:
            price = self.params["getEnergyFee"]
            staked_energy = max(0, owner.energy_limit - owner.energy_used)
            spendable = max(0, owner.balance - contract.amount)
            limit = min(staked_energy + spendable // price, raw.fee_limit // price)
            try:
                ran = self._evm_run(
                    contract.owner,
                    contract.to,
                    contract.data,
                    limit,
                    commit=True,
                    value=contract.amount,
                )
            except Refused as refused:
                raise Refused(
                    refused.code, "Contract validate error : " + refused.message
                ) from None
            result, used, output, logs = ran.result, ran.used, ran.output, ran.logs
            if result == "SUCCESS":
                self._move(contract.owner, contract.to, contract.amount)
                for call in ran.calls:
                    if not call.rejected:
                        self._move(call.caller, call.to, call.value)
            if ran.calls:
                info["internal_transactions"] = [
                    _internal_json(tx_id, n, call) for n, call in enumerate(ran.calls)
                ]
            from_stake = min(used, staked_energy)
            owner.energy_used += from_stake
            energy_fee = (used - from_stake) * price
            owner.balance -= energy_fee
            fee += energy_fee
            receipt.update(
                energy_usage=from_stake,
                energy_fee=energy_fee,
                energy_usage_total=used,
                result=result,
            )
            receipt = {k: v for k, v in receipt.items() if v or k == "result"}
            info["contractResult"] = [output.hex()]
            info["contract_address"] = contract.to.hex()
            if logs:
                info["log"] = logs
            ok = result == "SUCCESS"
            if not ok:
                info["result"] = "FAILED"
                info["resMessage"] = result.encode().hex()
        number = self._new_block() if block is None else block
        info.update(blockNumber=number, blockTimeStamp=self.blocks[number][2], receipt=receipt)
        if fee:
            info["fee"] = fee
        self.landed[tx_id] = Landed({}, raw, raw_bytes.hex(), signatures[0].hex(), info, number, ok)
        self.order.append(tx_id)
        self.block_txs.setdefault(number, []).append(tx_id)
        return number

    def _move(self, sender: bytes, to: bytes, sun: int) -> None:
        """`sun` TRX from `sender` to `to` (a call's value, or an internal transfer)."""
        if sun:
            self.accounts.setdefault(sender, Account()).balance -= sun
            self.accounts.setdefault(to, Account()).balance += sun

    @staticmethod
    def _signed_by(tx_id: str, signature: bytes, owner: bytes) -> bool:
        if len(signature) != 65:
            return False
        v = signature[64] - 27 if signature[64] >= 27 else signature[64]
        try:
            key = Signature(signature[:64] + bytes([v])).recover_public_key_from_msg_hash(
                bytes.fromhex(tx_id)
            )
        except Exception:  # noqa: BLE001 - no key recovers
            return False
        return b"\x41" + key.to_canonical_address() == owner

    # -- HTTP -----------------------------------------------------------------------------
    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        # no helper methods here: `answer` reaches any `_<path>` attribute
        self.last_headers = dict(headers)
        url = urlparse(path)
        self.paths.append(url.path)

        def reply(status: int, body: Any) -> tuple[int, str, bytes]:
            return status, "application/json", json.dumps(body).encode()

        if method == "POST":
            try:
                return reply(200, self.answer(url.path, json.loads(body or b"{}")))
            except KeyError:
                return reply(404, {"Error": f"no such API {url.path}"})
            except Exception as exc:  # noqa: BLE001 - java-tron's servlet error shape
                return reply(200, {"Error": f"class {type(exc).__name__} : {exc}"})
        if not url.path.startswith("/v1/accounts/"):
            return reply(404, {"success": False, "error": "not found"})
        try:
            return reply(200, self.grid(url.path, parse_qs(url.query)))
        except Exception as exc:  # noqa: BLE001 - TronGrid's error shape
            return reply(400, {"success": False, "error": str(exc), "statusCode": 400})


__all__ = [
    "BLOCK_LIMIT",
    "PARAMETERS",
    "PAY",
    "PAYER_SOURCE",
    "PAY_TOKEN",
    "TRY_PAY",
    "TronTestNode",
    "b58",
    "raw21",
]
