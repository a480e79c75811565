"""BITCOIN recipients: every address form the validator accepts, on every network, has its
locking script, and a transaction paying it is built, signed and holds exactly that script;
the fee's size and the dust limit count the same script."""

from __future__ import annotations

import hashlib

import base58
import pytest

from walletcore.domain.assets import Chain
from walletcore_chains import bclib, curves
from walletcore_chains.bitcoin import address_of, validate_address
from walletcore_chains.bitcoin.backend import Utxo
from walletcore_chains.bitcoin.coins import dust_limit
from walletcore_chains.bitcoin.network import NETWORKS, BitcoinNetwork
from walletcore_chains.bitcoin.scripts import is_witness, locking_script
from walletcore_chains.bitcoin.spend import Output
from walletcore_chains.bitcoin.txcodec import Body, assemble, payloads

HASH20 = hashlib.new("ripemd160", b"a recipient").digest()
HASH32 = hashlib.sha256(b"a recipient").digest()
#: the forms the validator accepts -> (their locking script, its dust limit in sat)
FORMS = {
    "p2pkh": (bytes.fromhex("76a914") + HASH20 + bytes.fromhex("88ac"), 546),
    "p2sh": (bytes.fromhex("a914") + HASH20 + bytes.fromhex("87"), 540),
    "p2wpkh": (bytes.fromhex("0014") + HASH20, 294),
    "p2wsh": (bytes.fromhex("0020") + HASH32, 330),
    "p2tr": (bytes.fromhex("5120") + HASH32, 330),
}


def address(network: BitcoinNetwork, form: str) -> str:
    """An address of `form` on `network`, encoded here from the hashes above (base58check
    with the network's version byte; bech32 / bech32m by bitcoinlib's encoder)."""
    if form in ("p2pkh", "p2sh"):
        version = network.p2pkh if form == "p2pkh" else network.p2sh
        return base58.b58encode_check(bytes([version]) + HASH20).decode("ascii")
    witver, program = {"p2wpkh": (0, HASH20), "p2wsh": (0, HASH32), "p2tr": (1, HASH32)}[form]
    encoded = bclib.encoding().pubkeyhash_to_addr_bech32(program, prefix=network.hrp, witver=witver)
    return str(encoded)


@pytest.fixture(params=list(NETWORKS))
def network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> BitcoinNetwork:
    monkeypatch.setenv("WALLETCORE_BITCOIN_NETWORK", request.param)
    return NETWORKS[request.param]


@pytest.mark.parametrize("form", list(FORMS))
def test_every_accepted_form_has_its_locking_script(network: BitcoinNetwork, form: str) -> None:
    accepted = validate_address(Chain.BITCOIN, address(network, form))
    script, dust = FORMS[form]
    assert locking_script(network, accepted) == script
    assert is_witness(script) is form.startswith(("p2w", "p2tr"))
    assert dust_limit(len(script), is_witness(script)) == dust  # the node's GetDustThreshold


def test_a_transaction_pays_every_form_exactly(network: BitcoinNetwork) -> None:
    """Signed as the KeyStore signs (one digest per coin), then parsed back: each output
    holds the recipient's script and value, on regtest as on mainnet."""
    secret = (7).to_bytes(32, "big")
    owner = address_of(curves.public_key("secp256k1", secret))
    recipients = [validate_address(Chain.BITCOIN, address(network, form)) for form in FORMS]
    outputs = tuple(Output(r, 10_000 + i) for i, r in enumerate(recipients))
    coin = Utxo("ab" * 32, 1, 100_000, None)
    body = Body(network.name, 200, ((coin, owner),), (*outputs, Output(owner, 40_000)), 9_990, {})
    digest = payloads(network, body)[owner]
    raw, txid = assemble(
        network, body, {owner: curves.sign("secp256k1", secret, digest)}, address_of
    )
    parsed = bclib.transactions().Transaction.parse_bytes(raw, network=network.bitcoinlib)
    paid = [(bytes(o.lock_script), o.value) for o in parsed.outputs]
    expected = [(script, 10_000 + i) for i, (script, _) in enumerate(FORMS.values())]
    assert paid == [*expected, (locking_script(network, owner), 40_000)]
    assert str(parsed.txid) == txid


@pytest.mark.parametrize(
    "foreign",
    [
        base58.b58encode_check(b"\x30" + HASH20).decode("ascii"),  # Litecoin's P2PKH
        base58.b58encode_check(b"\x00" + HASH20 + b"\x00").decode("ascii"),  # 22 bytes
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",  # another network's, on regtest
        "",
    ],
)
def test_anything_else_is_no_script(foreign: str) -> None:
    with pytest.raises(ValueError, match="not a regtest address"):
        locking_script(NETWORKS["regtest"], foreign)


def test_is_witness_reads_only_witness_programs() -> None:
    assert not is_witness(b"")
    assert not is_witness(bytes.fromhex("0015") + HASH20)  # a push of the wrong length
    assert not is_witness(bytes.fromhex("6114") + HASH20)  # OP_17 is no version
    assert is_witness(bytes.fromhex("6002abcd"))  # version 16, the shortest program
