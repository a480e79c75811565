"""Transactions through bitcoinlib's key and transaction classes: built unsigned, one
BIP143 digest per input, put together from the KeyStore's signatures.

- Version 2, every input's sequence 0xfffffffd (BIP125 replace-by-fee, so a stuck send
  can be bumped), locktime the tip height (anti fee sniping, as Bitcoin Core does).
- The body the core keeps between `prepare` and `assemble` is JSON: the coins (txid, vout,
  value, owner), the outputs, the fee, the locktime and the leases' turns; never a key.
- `assemble` recovers each signer's public key from its signature, checks it is the
  owner's address, rebuilds the transaction with it, checks every digest is the one that
  was signed, and reads the txid back from the serialised bytes (bitcoinlib's `txid`
  attribute is stale after signatures are set).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from walletcore_chains import bclib
from walletcore_chains.bitcoin.backend import Utxo
from walletcore_chains.bitcoin.network import BitcoinNetwork
from walletcore_chains.bitcoin.scripts import locking_script
from walletcore_chains.bitcoin.spend import Output, Spend
from walletcore_chains.curves import recover_secp256k1
from walletcore_chains.encodings import segwit_decode

RBF_SEQUENCE = 0xFFFFFFFD
_SIG, _DIGEST = 65, 32


@dataclass(frozen=True)
class Body:
    network: str
    locktime: int
    inputs: tuple[tuple[Utxo, str], ...]
    outputs: tuple[Output, ...]
    fee: int
    #: signer -> its turn on the address's lease (`NonceBook`)
    turns: dict[str, int]

    def encode(self) -> bytes:
        return json.dumps(
            {
                "network": self.network,
                "locktime": self.locktime,
                "inputs": [[c.txid, c.vout, c.value, owner] for c, owner in self.inputs],
                "outputs": [[o.address, o.value] for o in self.outputs],
                "fee": self.fee,
                "turns": self.turns,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Body:
        data = json.loads(raw)
        return cls(
            str(data["network"]),
            int(data["locktime"]),
            tuple((Utxo(t, int(v), int(val), None), str(o)) for t, v, val, o in data["inputs"]),
            tuple(Output(str(a), int(v)) for a, v in data["outputs"]),
            int(data["fee"]),
            {str(k): int(v) for k, v in data["turns"].items()},
        )

    @classmethod
    def of(
        cls, network: BitcoinNetwork, spend: Spend, locktime: int, turns: dict[str, int]
    ) -> Body:
        return cls(network.name, locktime, spend.inputs, spend.outputs, spend.fee, turns)


def _program(network: BitcoinNetwork, address: str) -> bytes:
    decoded = segwit_decode(network.hrp, address)
    if decoded is None or decoded[0] != 0 or len(decoded[1]) != 20:
        raise ValueError("a wallet's coins are P2WPKH")
    return decoded[1]


def _transaction(network: BitcoinNetwork, body: Body, keys: Mapping[str, bytes] | None) -> Any:
    transactions = bclib.transactions()
    tx = transactions.Transaction(
        network=network.bitcoinlib, witness_type="segwit", version=2, locktime=body.locktime
    )
    for coin, owner in body.inputs:
        common: dict[str, Any] = {
            "value": coin.value,
            "script_type": "sig_pubkey",
            "witness_type": "segwit",
            "sequence": RBF_SEQUENCE,
        }
        if keys is None:
            common["public_hash"] = _program(network, owner)
        else:
            common["keys"] = keys[owner].hex()
        tx.add_input(coin.txid, coin.vout, **common)
    for output in body.outputs:
        # the script, not the address: bitcoinlib cannot tell a regtest `m`/`n`/`2` address
        tx.add_output(output.value, lock_script=locking_script(network, output.address))
    return tx


def digests(
    network: BitcoinNetwork, body: Body, keys: Mapping[str, bytes] | None = None
) -> list[bytes]:
    """The BIP143 digest each input's owner signs (SIGHASH_ALL), in input order."""
    tx = _transaction(network, body, keys)
    return [bytes(tx.signature_hash(i, witness_type="segwit")) for i in range(len(body.inputs))]


def payloads(network: BitcoinNetwork, body: Body) -> dict[str, bytes]:
    """signer -> the digests of its inputs, concatenated in input order."""
    out: dict[str, bytes] = {}
    for (_, owner), digest in zip(body.inputs, digests(network, body), strict=True):
        out[owner] = out.get(owner, b"") + digest
    return out


def assemble(
    network: BitcoinNetwork, body: Body, signatures: Mapping[str, bytes], address_of: Any
) -> tuple[bytes, str]:
    """The signed transaction's bytes and txid, from `n x 65` signature bytes per signer."""
    expected = payloads(network, body)
    if set(signatures) != set(expected):
        raise ValueError("one signature per signer is needed")
    keys: dict[str, bytes] = {}
    for owner, digest_bytes in expected.items():
        sigs = signatures[owner]
        if len(sigs) != len(digest_bytes) // _DIGEST * _SIG:
            raise ValueError("one signature per coin is needed")
        public = recover_secp256k1(digest_bytes[:_DIGEST], sigs[:_SIG])
        if public is None or address_of(public) != owner:
            raise ValueError("a signature is not the coin owner's")
        keys[owner] = public
    tx = _transaction(network, body, keys)
    keys_module = bclib.keys()
    position: dict[str, int] = {}
    for index, (_, owner) in enumerate(body.inputs):
        n = position.get(owner, 0)
        position[owner] = n + 1
        digest = bytes(tx.signature_hash(index, witness_type="segwit"))
        if digest != expected[owner][n * _DIGEST : (n + 1) * _DIGEST]:
            raise ValueError("the transaction changed after it was signed")
        signature = signatures[owner][n * _SIG : (n + 1) * _SIG]
        r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")
        public = keys_module.Key(keys[owner].hex(), network=network.bitcoinlib)
        tx.inputs[index].signatures = [
            keys_module.Signature(r, s, message=digest, public_key=public)
        ]
        tx.inputs[index].update_scripts()
    if not tx.verify():
        raise ValueError("the signed transaction does not verify")
    raw = bytes(tx.raw())
    return raw, txid_of(network, raw)


def txid_of(network: BitcoinNetwork, raw: bytes) -> str:
    tx = bclib.transactions().Transaction.parse_bytes(raw, network=network.bitcoinlib)
    return str(tx.txid)


__all__ = ["RBF_SEQUENCE", "Body", "assemble", "digests", "payloads", "txid_of"]
