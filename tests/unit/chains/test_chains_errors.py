"""One reading of the chain nodes' failures (`walletcore_chains.errors`), and each chain's
message table through it: the first row that matches decides, codes and words together,
case folded or not, transport failures searched through their causes when told."""

from __future__ import annotations

import re
import socket

import pytest

from walletcore.domain.errors import (
    BroadcastTimeout,
    HistoryUnavailable,
    InsufficientFunds,
    InsufficientGas,
    InvalidRequest,
    NodeUnavailable,
    TransferRejected,
)
from walletcore_chains.errors import AlreadyKnown, Reads, Refusals, Says, Transport


class Marker(Exception):
    pass


TABLE = Refusals(
    (
        Says(AlreadyKnown, ("already known",)),
        Reads(re.compile(r"expected (\d+), got (\d+)"), lambda m: Marker(m.group(1))),
        Says(lambda: InsufficientFunds("poor"), ("funds", re.compile(r"0x1(?: |$)"))),
        Says(lambda: InsufficientGas("gas"), ("low",), codes=("CODE_A",)),
        Says(lambda: NodeUnavailable("busy"), codes=("BUSY",)),
    )
)


def test_the_first_matching_row_decides_and_no_row_is_a_rejection() -> None:
    assert isinstance(TABLE.read("Already Known; insufficient funds"), AlreadyKnown)
    found = TABLE.read("nonce: expected 7, got 3 (funds)")
    assert isinstance(found, Marker) and str(found) == "7"
    assert str(TABLE.read("INSUFFICIENT FUNDS")) == "poor"
    rejected = TABLE.read("txpool is full")
    assert isinstance(rejected, TransferRejected)
    assert str(rejected) == "Transfer rejected by the network; nothing was sent"


def test_a_pattern_row_matches_what_a_phrase_cannot() -> None:
    assert str(TABLE.read("custom program error: 0x1")) == "poor"
    assert str(TABLE.read("custom program error: 0x1 log")) == "poor"
    assert isinstance(TABLE.read("custom program error: 0x10"), TransferRejected)


def test_codes_and_words_both_decide_when_a_row_names_both() -> None:
    assert str(TABLE.read("gas too low", "CODE_A")) == "gas"
    assert isinstance(TABLE.read("gas too low", "CODE_B"), TransferRejected)
    assert isinstance(TABLE.read("gas too high", "CODE_A"), TransferRejected)
    assert str(TABLE.read("", "BUSY")) == "busy"
    assert isinstance(TABLE.read("", "busy"), TransferRejected)  # codes are not folded


def test_a_case_sensitive_table_reads_the_words_as_they_are() -> None:
    table = Refusals((Says(AlreadyKnown, ("AlreadyProcessed",)),), fold_case=False)
    assert isinstance(table.read("AlreadyProcessed"), AlreadyKnown)
    assert isinstance(table.read("alreadyprocessed"), TransferRejected)


def test_a_transport_tells_a_request_that_never_left() -> None:
    flat = Transport(lambda: (ConnectionRefusedError, socket.gaierror))
    deep = Transport(lambda: (ConnectionRefusedError,), causes=True)
    wrapped = RuntimeError("client")
    wrapped.__cause__ = ConnectionRefusedError()
    assert flat.unreachable(socket.gaierror()) and not flat.unreachable(wrapped)
    assert deep.unreachable(wrapped) and not deep.unreachable(RuntimeError("x"))
    assert not flat.unreachable(None)

    unreachable = flat.read_error(ConnectionRefusedError())
    assert isinstance(unreachable, NodeUnavailable)
    assert unreachable.message == "Chain node unreachable; retry with backoff"
    assert flat.read_error(ValueError()).message == (
        "The chain node could not answer; retry with backoff"
    )
    assert isinstance(flat.read_error(ValueError(), history=True), HistoryUnavailable)
    refused = InvalidRequest("as it is")
    assert flat.read_error(refused) is refused

    never_left = flat.send_error(ConnectionRefusedError())
    assert isinstance(never_left, NodeUnavailable)
    assert never_left.message == "Chain node unreachable; nothing was sent; retry with backoff"
    assert isinstance(flat.send_error(TimeoutError()), BroadcastTimeout)


@pytest.mark.parametrize(
    ("words", "meaning", "says"),
    [
        ("already known", AlreadyKnown, ""),
        ("invalid transaction nonce: expected 5, but got 3", "NonceUsed", ""),
        ("invalid transaction nonce: expected 3, but got 5", TransferRejected, "nonce gap"),
        ("replacement transaction underpriced", TransferRejected, "equal or higher fee"),
        ("nonce too low: next nonce 4, tx nonce 3", "NonceUsed", ""),
        ("max fee per gas less than block base fee", TransferRejected, "below what"),
        ("Insufficient funds for gas * price + value", InsufficientFunds, "amount and the gas"),
        ("intrinsic gas too low: gas 1, minimum needed 21000", InsufficientGas, ""),
        ("txpool is full", TransferRejected, "rejected by the network; nothing"),
    ],
)
def test_the_evm_table(words: str, meaning: type | str, says: str) -> None:
    from walletcore_chains.evm.errors import REFUSALS

    found = REFUSALS.read(words)
    name = meaning if isinstance(meaning, str) else meaning.__name__
    assert type(found).__name__ == name and says in str(found)


@pytest.mark.parametrize(
    ("words", "meaning", "says"),
    [
        ("txn-already-in-mempool", AlreadyKnown, ""),
        ("bad-txns-inputs-missingorspent", "Spent", ""),
        ("too-long-mempool-chain, too many descendants", TransferRejected, "mempool chain"),
        ("min relay fee not met, 100 < 141", TransferRejected, "minimum relay fee"),
        ("bad-txns-in-belowout", InsufficientFunds, "Insufficient BTC"),
        ("dust", InvalidRequest, "dust limit"),
    ],
)
def test_the_bitcoin_table(words: str, meaning: type | str, says: str) -> None:
    from walletcore_chains.bitcoin.errors import refusal

    found = refusal(words)
    name = meaning if isinstance(meaning, str) else meaning.__name__
    assert type(found).__name__ == name and says in str(found)


@pytest.mark.parametrize(
    ("code", "words", "token", "meaning", "says"),
    [
        ("DUP_TRANSACTION_ERROR", "", False, AlreadyKnown, ""),
        ("TRANSACTION_EXPIRATION_ERROR", "", False, "Expired", ""),
        ("BANDWITH_ERROR", "", False, InsufficientGas, "bandwidth"),
        ("CONTRACT_VALIDATE_ERROR", "balance is not sufficient", False, InsufficientFunds, ""),
        ("CONTRACT_VALIDATE_ERROR", "account does not exist", False, InsufficientFunds, "not"),
        ("CONTRACT_VALIDATE_ERROR", "REVERT", True, TransferRejected, "invalid token transfer"),
        ("CONTRACT_VALIDATE_ERROR", "REVERT", False, TransferRejected, "invalid transfer"),
        ("SERVER_BUSY", "", False, NodeUnavailable, "cannot take transactions"),
        ("OTHER_ERROR", "balance is not sufficient", False, TransferRejected, "network;"),
    ],
)
def test_the_tron_table(code: str, words: str, token: bool, meaning: type | str, says: str) -> None:
    from walletcore_chains.tron.errors import broadcast_refusal

    found = broadcast_refusal({"code": code, "message": words.encode().hex()}, token=token)
    name = meaning if isinstance(meaning, str) else meaning.__name__
    assert type(found).__name__ == name and says in str(found)


@pytest.mark.parametrize(
    ("words", "meaning", "says"),
    [
        ("AlreadyProcessed", AlreadyKnown, ""),
        ("InsufficientFundsForFee", InsufficientFunds, "network fee"),
        ("Transfer: insufficient lamports 10, need 1000", InsufficientFunds, "balance"),
        ("UninitializedAccount", InsufficientFunds, "no account of the token"),
        ("Blockhash not found", TransferRejected, "blockhash expired"),
        ("custom program error: 0x10", TransferRejected, "network; nothing"),
    ],
)
def test_the_solana_table(words: str, meaning: type, says: str) -> None:
    from walletcore_chains.solana.errors import refusal

    found = refusal(words)
    assert type(found) is meaning and says in str(found)
