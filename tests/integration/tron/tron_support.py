"""Helpers of the TRON gateway tests: keys signing as the KeyStore's `ChainKey` does, the
gateway over the loopback node, one send, and tronweb (npm) as an independent check."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.ports import FeeQuote, SignedTransfer, Transfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains import curves
from walletcore_chains.testing.tron_node import TronTestNode
from walletcore_chains.tron import address_of, validate_address, verify_signature
from walletcore_chains.tron.client import TronClient
from walletcore_chains.tron.gateway import TronGateway, TronOptions

TRX, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(4),
    CONTRACT_CATALOG.asset_by_id(41),
    CONTRACT_CATALOG.asset_by_id(42),
)
ROOT = Path(__file__).resolve().parents[3]
#: where `python3 dev.py test` installs tronweb (and where the tests install it otherwise)
TRONWEB_DIR = Path(os.environ.get("WALLETCORE_TRONWEB_DIR", ROOT / ".venv" / "tronweb"))


class Wallet:
    """A secp256k1 key signing a 32-byte digest as the sealed KeyStore's `ChainKey` does,
    each signature checked against the address before it is handed out."""

    def __init__(self) -> None:
        self.secret = secrets.token_bytes(32)
        self.address = address_of(curves.public_key("secp256k1", self.secret))

    def sign(self, payload: bytes) -> bytes:
        signature = curves.sign("secp256k1", self.secret, payload)
        assert verify_signature(Chain.TRON, self.address, payload, signature)
        return signature


def make_gateway(node: TronTestNode, **options: Any) -> TronGateway:
    client = TronClient(node.url, api_key="test-key", timeout=10)
    return TronGateway(
        client, validate_address, tokens=node.tokens, options=TronOptions(network="nile", **options)
    )


async def signed_transfer(
    gw: TronGateway,
    sender: Wallet,
    recipient: str,
    asset: Any,
    units: int,
    *,
    sponsor: Wallet | None = None,
    fee_from_amount: bool = False,
) -> tuple[SignedTransfer, FeeQuote]:
    """Quote, prepare and sign a send, as the service does before it broadcasts."""
    payer = sponsor.address if sponsor else None
    quote = await gw.fee(sender.address, recipient, asset, units, fee_payer=payer)
    amount = units - quote.native_units if fee_from_amount else units
    transfer = Transfer(asset, sender.address, recipient, amount, payer or sender.address)
    unsigned = await gw.prepare(transfer, quote)
    signatures = {sender.address: sender.sign(unsigned.payload_for(sender.address))}
    if sponsor is not None:
        signatures[sponsor.address] = sponsor.sign(unsigned.payload_for(sponsor.address))
    return gw.assemble(unsigned, signatures), quote


def tronweb_dir() -> Path | None:
    """tronweb's install, which `python3 dev.py test` makes (`dev.py: install_tronweb`);
    None when it is not there."""
    return TRONWEB_DIR if (TRONWEB_DIR / "node_modules" / "tronweb").is_dir() else None


_CHECK = r"""
const { Trx, utils } = require('tronweb');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = input.map((tx) => {
  const pb = utils.transaction.txJsonToPb(tx);
  const txID = utils.transaction.txPbToTxID(pb).replace(/^0x/, '');
  const rawDataHex = utils.transaction.txPbToRawDataHex(pb).replace(/^0x/, '').toLowerCase();
  const signer = Trx.ecRecover({ ...tx, txID });
  return { txID, rawDataHex, signer };
});
process.stdout.write(JSON.stringify(out));
"""


def tronweb_check(directory: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tronweb's reading of each transaction as the node reports it (`gettransactionbyid`,
    `visible: false`): the txID it computes from `raw_data` (its own protobuf encoding, not
    ours), that encoding's hex, and the signer it recovers from the signature."""
    done = subprocess.run(
        ["node", "-e", _CHECK],
        input=json.dumps(items).encode(),
        capture_output=True,
        cwd=directory,
        env={**os.environ, "NODE_PATH": str(directory / "node_modules")},
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


_TRANSFERS = r"""
const { TronWeb, utils } = require('tronweb');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const TRANSFER = input.topic;
const out = [];
for (const info of input.infos) {
  (info.log || []).forEach((log, index) => {
    const topics = log.topics || [];
    if (topics.length !== 3 || topics[0] !== TRANSFER) return;
    const read = utils.abi.decodeParams(
      ['from', 'to', 'value'], ['address', 'address', 'uint256'],
      '0x' + topics[1] + topics[2] + log.data, true);
    out.push({
      txID: info.id, index,
      token: TronWeb.address.fromHex('41' + log.address),
      from: TronWeb.address.fromHex(read.from),
      to: TronWeb.address.fromHex(read.to),
      value: read.value.toString(),
    });
  });
}
process.stdout.write(JSON.stringify(out));
"""


def tronweb_transfers(
    directory: Path, infos: list[dict[str, Any]], topic: str
) -> list[dict[str, Any]]:
    """tronweb's reading of every `Transfer` log (`topic`) of the receipts as the node
    reports them (`gettransactioninfobyblocknum`): the token contract, `from`, `to` (its
    ABI decoder, its hex-to-base58) and the value, with the log's index in its receipt."""
    done = subprocess.run(
        ["node", "-e", _TRANSFERS],
        input=json.dumps({"infos": infos, "topic": topic}).encode(),
        capture_output=True,
        cwd=directory,
        env={**os.environ, "NODE_PATH": str(directory / "node_modules")},
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]
