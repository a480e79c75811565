"""Results of the statements sent straight to the driver, in the shape the stores read.

`RawResult` answers what the stores ask of SQLAlchemy's result (`mappings().one_or_none()`,
`.all()`, `scalar_one_or_none()`, `rowcount`); `result_of` builds it from the driver's
records through the plan's result processors; `rowcount` reads a PostgreSQL command tag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import exc as sa_exc

from walletcore_sql.direct.plans import Plan


class RawResult:
    """What the stores read of a result: `mappings().one_or_none()` / `.all()`, scalars."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[dict[str, Any]], rowcount: int | None = None) -> None:
        self._rows = rows
        #: rows matched (a SELECT's, or a RETURNING statement's, rows; else the server's count)
        self.rowcount = len(rows) if rowcount is None else rowcount

    def mappings(self) -> RawResult:
        return self

    def all(self) -> list[dict[str, Any]]:
        return self._rows

    def one_or_none(self) -> dict[str, Any] | None:
        if len(self._rows) > 1:
            raise sa_exc.MultipleResultsFound("more than one row where one or none was required")
        return self._rows[0] if self._rows else None

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else next(iter(row.values()))


def result_of(plan: Plan, records: Sequence[Sequence[Any]]) -> RawResult:
    """The rows of `records` by column name, each value through its result processor."""
    keys, processors = plan.keys, plan.processors
    assert processors is not None
    if not any(processors):
        return RawResult([dict(zip(keys, record, strict=True)) for record in records])
    return RawResult(
        [
            {
                key: value if process is None or value is None else process(value)
                for key, process, value in zip(keys, processors, record, strict=True)
            }
            for record in records
        ]
    )


def rowcount(status: str | None) -> int:
    """Rows a statement matched, from the server's command tag (as SQLAlchemy reads it)."""
    found = _COMMAND_TAG.match(status or "")
    return int(found.group(1)) if found else -1


_COMMAND_TAG = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")
