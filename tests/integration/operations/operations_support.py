"""Helpers of the operations tests: the Prometheus text exposition, read."""

from __future__ import annotations

import re
from typing import Any

SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition as {(name, labels): value}."""
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = SAMPLE.match(line)
        assert match is not None, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match["labels"] or ""))
        found[(match["name"], labels)] = float(match["value"])
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)
