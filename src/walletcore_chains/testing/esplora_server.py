"""A small Esplora HTTP API for the tests, answering from a regtest `bitcoind` (so the Core
and Esplora backends see one chain): a stdlib `ThreadingHTTPServer` on 127.0.0.1 (a free
port) in a thread, used as a context manager; `url` is what `WALLETCORE_BITCOIN_ESPLORA_URL`
takes.

It indexes through a watch-only wallet of its own (`esplora-index`) on the node, importing
an address (rescan from genesis: cheap on regtest) the first time it is asked about; the
answers have Esplora's shapes: `/blocks/tip/height`, `/address/:a`, `/address/:a/utxo`,
`/address/:a/txs`, `/tx/:txid` (404 `Transaction not found`), `/tx/:txid/outspend/:vout`
(the spender from the mempool, `gettxspendingprevout`, or from the blocks since the
funding one, scanned; `{"spent": false}` for an unknown output, as electrs answers),
`/fee-estimates`, `POST /tx`
(400 `sendrawtransaction RPC error: {"code":..,"message":..}`, as electrs words it), and the
blocks the deposit scan reads: `/blocks/tip/hash`, `/block-height/:h` (404 `Block not
found` above the tip), `/block/:hash`, `/block/:hash/raw` (the block's bytes),
`/tx/:txid/status`.
"""

from __future__ import annotations

import json
import threading
from decimal import Decimal
from email.message import Message
from typing import Any, NoReturn

import httpx

from walletcore.testing.http import LoopbackHttpServer

WALLET = "esplora-index"


def _sats(btc: Any) -> int:
    return int((Decimal(str(btc)) * 100_000_000).to_integral_value())


class EsploraTestServer(LoopbackHttpServer):
    def __init__(self, rpc_url: str, rpc_auth: tuple[str, str]) -> None:
        self._rpc = httpx.Client(base_url=rpc_url, auth=rpc_auth, timeout=120)
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self._wallet = False
        super().__init__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._rpc.close()

    # -- the node ----------------------------------------------------------------------
    def _call(self, method: str, *params: Any, wallet: bool = False) -> Any:
        path = f"/wallet/{WALLET}" if wallet else "/"
        body = {"jsonrpc": "1.0", "id": 1, "method": method, "params": list(params)}
        answer = json.loads(
            self._rpc.post(path, content=json.dumps(body)).content, parse_float=Decimal
        )
        if answer.get("error"):
            raise _RpcError(answer["error"])
        return answer["result"]

    def _watch(self, address: str) -> None:
        with self._lock:
            if not self._wallet:
                if WALLET not in self._call("listwallets"):
                    self._call("createwallet", WALLET, True, True, "", False, True)
                self._wallet = True
            if address in self._watched:
                return
            desc = self._call("getdescriptorinfo", f"addr({address})")["descriptor"]
            self._call("importdescriptors", [{"desc": desc, "timestamp": 0}], wallet=True)
            self._watched.add(address)

    def _tx(self, txid: str) -> dict[str, Any]:
        raw = self._call("getrawtransaction", txid, 2)
        tip = int(self._call("getblockcount"))
        vin = []
        total_in = 0
        for v in raw["vin"]:
            if "coinbase" in v:
                vin.append(
                    {
                        "is_coinbase": True,
                        "txid": "0" * 64,
                        "vout": 4294967295,
                        "prevout": None,
                        "sequence": v.get("sequence"),
                    }
                )
                continue
            prevout = v.get("prevout")
            if prevout is None:
                parent = self._call("getrawtransaction", v["txid"], 1)
                prevout = parent["vout"][v["vout"]]
            value = _sats(prevout["value"])
            total_in += value
            vin.append(
                {
                    "txid": v["txid"],
                    "vout": v["vout"],
                    "is_coinbase": False,
                    "sequence": v.get("sequence"),
                    "prevout": {
                        "scriptpubkey_address": prevout["scriptPubKey"].get("address"),
                        "value": value,
                    },
                }
            )
        vout = [
            {"scriptpubkey_address": o["scriptPubKey"].get("address"), "value": _sats(o["value"])}
            for o in raw["vout"]
        ]
        coinbase = any(v.get("is_coinbase") for v in vin)
        confirmations = int(raw.get("confirmations", 0))
        status: dict[str, Any] = {"confirmed": confirmations > 0}
        if confirmations > 0:
            status.update(
                block_height=tip - confirmations + 1,
                block_hash=raw["blockhash"],
                block_time=raw["blocktime"],
            )
        return {
            "txid": raw["txid"],
            "version": raw["version"],
            "locktime": raw["locktime"],
            "vin": vin,
            "vout": vout,
            "size": raw["size"],
            "weight": raw["weight"],
            "fee": 0 if coinbase else total_in - sum(o["value"] for o in vout),
            "status": status,
        }

    def _outspend(self, txid: str, vout: int) -> dict[str, Any]:
        found = self._call("gettxspendingprevout", [{"txid": txid, "vout": vout}])
        for entry in found:
            if entry.get("spendingtxid"):
                spender = self._call("getrawtransaction", entry["spendingtxid"], 1)
                index = next(
                    i
                    for i, v in enumerate(spender["vin"])
                    if v.get("txid") == txid and v.get("vout") == vout
                )
                return {
                    "spent": True,
                    "txid": entry["spendingtxid"],
                    "vin": index,
                    "status": {"confirmed": False},
                }
        if self._call("gettxout", txid, vout, True) is not None:
            return {"spent": False}
        try:
            funding = self._call("getrawtransaction", txid, 1)
        except _RpcError:
            return {"spent": False}  # electrs: an output it does not know is not spent
        confirmations = int(funding.get("confirmations", 0))
        if confirmations <= 0 or vout >= len(funding["vout"]):
            return {"spent": False}
        tip = int(self._call("getblockcount"))
        for height in range(tip - confirmations + 1, tip + 1):
            block = self._call("getblock", self._call("getblockhash", height), 2)
            for tx in block["tx"]:
                for index, v in enumerate(tx["vin"]):
                    if v.get("txid") == txid and v.get("vout") == vout:
                        return {
                            "spent": True,
                            "txid": tx["txid"],
                            "vin": index,
                            "status": {
                                "confirmed": True,
                                "block_height": height,
                                "block_hash": block["hash"],
                                "block_time": block["time"],
                            },
                        }
        return {"spent": False}

    def _address_txs(self, address: str) -> list[dict[str, Any]]:
        self._watch(address)
        entries = self._call("listtransactions", "*", 100000, 0, True, wallet=True)
        txids = list(dict.fromkeys(e["txid"] for e in reversed(entries)))
        out = []
        for txid in txids:
            try:
                tx = self._tx(txid)
            except _RpcError:
                continue  # replaced or dropped
            if any(
                v.get("prevout") and v["prevout"]["scriptpubkey_address"] == address
                for v in tx["vin"]
            ) or any(o["scriptpubkey_address"] == address for o in tx["vout"]):
                out.append(tx)
        out.sort(key=lambda t: -(t["status"].get("block_height") or 1 << 62))
        mempool = [t for t in out if not t["status"]["confirmed"]][:50]
        chain = [t for t in out if t["status"]["confirmed"]][:25]
        return mempool + chain

    def _utxo(self, address: str) -> list[dict[str, Any]]:
        self._watch(address)
        tip = int(self._call("getblockcount"))
        entries = self._call("listunspent", 0, 9999999, [address], True, wallet=True)
        out = []
        for e in entries:
            confirmations = int(e["confirmations"])
            status: dict[str, Any] = {"confirmed": confirmations > 0}
            if confirmations > 0:
                status["block_height"] = tip - confirmations + 1
            out.append(
                {
                    "txid": e["txid"],
                    "vout": e["vout"],
                    "value": _sats(e["amount"]),
                    "status": status,
                }
            )
        return out

    def _stats(self, address: str) -> dict[str, Any]:
        txs = self._address_txs(address)
        confirmed = sum(1 for t in txs if t["status"]["confirmed"])
        return {
            "address": address,
            "chain_stats": {"tx_count": confirmed},
            "mempool_stats": {"tx_count": len(txs) - confirmed},
        }

    def _status(self, txid: str) -> dict[str, Any]:
        """Unconfirmed for any transaction not in a main-chain block, known or not (as
        electrs answers)."""
        try:
            raw = self._call("getrawtransaction", txid, 1)
        except _RpcError:
            return {"confirmed": False}
        if int(raw.get("confirmations", 0)) <= 0:
            return {"confirmed": False}
        header = self._call("getblockheader", raw["blockhash"], True)
        return {
            "confirmed": True,
            "block_height": header["height"],
            "block_hash": raw["blockhash"],
            "block_time": header["time"],
        }

    def _block(self, block_hash: str) -> dict[str, Any]:
        header = self._call("getblockheader", block_hash, True)
        return {
            "id": header["hash"],
            "height": header["height"],
            "version": header["version"],
            "timestamp": header["time"],
            "tx_count": header["nTx"],
            "merkle_root": header["merkleroot"],
            "previousblockhash": header.get("previousblockhash"),
        }

    def _blocks(self, parts: list[str]) -> tuple[int, str, str | bytes]:
        """The block endpoints: `(status, content type, content)`."""
        try:
            if parts == ["blocks", "tip", "hash"]:
                return 200, "text/plain", str(self._call("getbestblockhash"))
            if len(parts) == 2 and parts[0] == "block-height":
                return 200, "text/plain", str(self._call("getblockhash", int(parts[1])))
            if len(parts) == 2 and parts[0] == "block":
                return 200, "application/json", json.dumps(self._block(parts[1]))
            if len(parts) == 3 and parts[0] == "block" and parts[2] == "raw":
                raw = bytes.fromhex(self._call("getblock", parts[1], 0))
                return 200, "application/octet-stream", raw
        except _RpcError:
            return 404, "text/plain", "Block not found"
        return 404, "text/plain", "Not found"

    def _fees(self) -> dict[str, float]:
        out = {}
        for target in (1, 2, 3, 6, 12, 25):
            estimate = self._call("estimatesmartfee", target)
            if estimate.get("feerate") is not None:
                out[str(target)] = float(Decimal(str(estimate["feerate"])) * 100_000)
        return out

    # -- HTTP --------------------------------------------------------------------------
    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        path = path.split("?")[0].rstrip("/")
        status, content, kind = 200, "", "application/json"
        try:
            parts = path.strip("/").split("/")
            if (
                method == "GET"
                and parts[0] in ("blocks", "block", "block-height")
                and (parts != ["blocks", "tip", "height"])
            ):
                status, kind, body_out = self._blocks(parts)
                return status, kind, body_out if isinstance(body_out, bytes) else body_out.encode()
            if method == "POST" and parts == ["tx"]:
                try:
                    content, kind = (
                        self._call("sendrawtransaction", body.decode().strip()),
                        "text/plain",
                    )
                except _RpcError as exc:
                    status, kind = 400, "text/plain"
                    content = "sendrawtransaction RPC error: " + json.dumps(exc.error)
            elif parts == ["blocks", "tip", "height"]:
                content, kind = str(self._call("getblockcount")), "text/plain"
            elif parts == ["fee-estimates"]:
                content = json.dumps(self._fees())
            elif len(parts) == 3 and parts[0] == "tx" and parts[2] == "status":
                content = json.dumps(self._status(parts[1]))
            elif len(parts) == 4 and parts[0] == "tx" and parts[2] == "outspend":
                content = json.dumps(self._outspend(parts[1], int(parts[3])))
            elif len(parts) == 2 and parts[0] == "tx":
                try:
                    content = json.dumps(self._tx(parts[1]))
                except _RpcError:
                    status, content, kind = 404, "Transaction not found", "text/plain"
            elif len(parts) >= 2 and parts[0] == "address":
                address = parts[1]
                try:
                    if not self._call("validateaddress", address)["isvalid"]:
                        _invalid()
                except _RpcError:
                    _invalid()
                if len(parts) == 2:
                    content = json.dumps(self._stats(address))
                elif parts[2] == "utxo":
                    content = json.dumps(self._utxo(address))
                elif parts[2] == "txs":
                    content = json.dumps(self._address_txs(address))
                else:
                    status, content, kind = 404, "Not found", "text/plain"
            else:
                status, content, kind = 404, "Not found", "text/plain"
        except _Invalid:
            status, content, kind = 400, "Invalid Bitcoin address", "text/plain"
        except Exception as exc:  # noqa: BLE001 - a test server: say what broke
            status, content, kind = 500, type(exc).__name__, "text/plain"
        return status, kind, str(content).encode()


class _RpcError(Exception):
    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


class _Invalid(Exception):
    pass


def _invalid() -> NoReturn:
    raise _Invalid()


__all__ = ["EsploraTestServer"]
