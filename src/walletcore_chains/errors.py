"""A chain node's failures read into domain errors, the same way for every chain.

Each chain declares what its node says and this module reads it:

- `Transport`: the failures of its client that mean the request never reached the node
  (connection refused, DNS, connect timeout). A failed read is `NodeUnavailable` (503,
  retry with backoff) either way, saying "unreachable" for those; a send that never left
  is `NodeUnavailable` "nothing was sent", any other failed send has an unknown outcome
  (`BroadcastTimeout`, 504): never "refused" for a transaction that may have landed.
- `Refusals`: its node's message table, rows of the node's words (phrases or patterns) or
  codes and what they mean, the first row that matches deciding: a domain error (nothing
  was sent), `AlreadyKnown` (the node has the transaction: it counts as sent), or a
  marker of the chain's own that its gateway settles (a nonce used, coins spent, an
  expired transaction: sent before, or refused). No row: `TransferRejected`.

The node's own words never reach the client: only the meanings do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from walletcore.domain.errors import (
    BroadcastTimeout,
    DomainError,
    HistoryUnavailable,
    NodeUnavailable,
    TransferRejected,
)


class AlreadyKnown(Exception):
    """The node has this transaction already: it counts as sent."""


def unreachable_read() -> NodeUnavailable:
    return NodeUnavailable("Chain node unreachable; retry with backoff")


def unreachable_send() -> NodeUnavailable:
    return NodeUnavailable("Chain node unreachable; nothing was sent; retry with backoff")


def no_answer() -> NodeUnavailable:
    """A read the node could not answer: transient from the client's side."""
    return NodeUnavailable("The chain node could not answer; retry with backoff")


def rejected() -> TransferRejected:
    """A refusal no row of the table names."""
    return TransferRejected("Transfer rejected by the network; nothing was sent")


@dataclass(frozen=True, slots=True)
class Transport:
    """Which failures of a chain's client mean the request never reached the node.

    `kinds` names their exception types when first asked (a chain's HTTP library is
    imported with its gateway, never with this module); with `causes`, the chain of
    `__cause__` / `__context__` is searched too (a client that wraps its transport's
    errors in its own)."""

    kinds: Callable[[], tuple[type[BaseException], ...]]
    causes: bool = False

    def unreachable(self, exc: BaseException | None) -> bool:
        """A connection that was never made: the request cannot have reached the node."""
        kinds = self.kinds()
        while exc is not None:
            if isinstance(exc, kinds):
                return True
            if not self.causes:
                return False
            exc = exc.__cause__ or exc.__context__
        return False

    def read_error(self, exc: BaseException | None, *, history: bool = False) -> DomainError:
        """A failed read (balance, fee, lookup, ...): a domain error passes unchanged;
        unreachable -> 503 saying so; anything else -> 503 too (on `/transactions` with
        `history`, the history's own 503)."""
        if isinstance(exc, DomainError):
            return exc
        if self.unreachable(exc):
            return unreachable_read()
        if history:
            return HistoryUnavailable()
        return no_answer()

    def send_error(self, exc: BaseException) -> DomainError:
        """A broadcast whose request failed without an answer: never sent when it never
        left (503), else its outcome is unknown (504)."""
        if self.unreachable(exc):
            return unreachable_send()
        return BroadcastTimeout()


@dataclass(frozen=True, slots=True)
class Says:
    """A row of a message table: the node's answer means `meaning()` when it carries one
    of `words` (a phrase, or a pattern searched for) and, when `codes` are named, its code
    is one of them (no `words`: the code alone decides)."""

    meaning: Callable[[], BaseException]
    words: tuple[str | re.Pattern[str], ...] = ()
    codes: tuple[str, ...] = ()

    def matches(self, text: str, code: str) -> bool:
        if self.codes and code not in self.codes:
            return False
        if not self.words:
            return bool(self.codes)
        return any(
            (w in text) if isinstance(w, str) else (w.search(text) is not None) for w in self.words
        )


@dataclass(frozen=True, slots=True)
class Reads:
    """A row whose meaning depends on what the pattern found in the node's words (say, the
    nonce it expected and the one it got)."""

    pattern: re.Pattern[str]
    meaning: Callable[[re.Match[str]], BaseException]


@dataclass(frozen=True, slots=True)
class Refusals:
    """A chain node's message table: the first row that matches decides, else
    `otherwise()`. With `fold_case`, the node's words are read in lower case (the rows'
    phrases are written so); the codes are compared as they are."""

    rows: tuple[Says | Reads, ...]
    otherwise: Callable[[], BaseException] = rejected
    fold_case: bool = True

    def read(self, text: str, code: str = "") -> BaseException:
        """What the node's refusal (`text`, and its `code` when it gives one) means."""
        words = text.lower() if self.fold_case else text
        for row in self.rows:
            if isinstance(row, Reads):
                found = row.pattern.search(words)
                if found is not None:
                    return row.meaning(found)
            elif row.matches(words, code):
                return row.meaning()
        return self.otherwise()


__all__ = [
    "AlreadyKnown",
    "Reads",
    "Refusals",
    "Says",
    "Transport",
    "no_answer",
    "rejected",
    "unreachable_read",
    "unreachable_send",
]
