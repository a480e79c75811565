"""A raw wire value: what a JSON body (or a header, as a string) holds before a use case
reads it.

A binding hands the use cases the values it received as they are, and the use case reads
them in its own order, each failure a 400 with the spec's message (`parse_id`,
`parse_asset_id`, `parse_amount`, the password's rules): a wrongly typed field is one of
those 400s, never a binding's own error. `JsonValue` types those parameters: any value a
JSON decoder can produce, and nothing else (never a `Decimal`, a `bytes` or an object).
"""

from __future__ import annotations

from typing import TypeAlias

#: A value as JSON decodes it: a string, a number, a boolean, null, an array or an object.
JsonValue: TypeAlias = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]

__all__ = ["JsonValue"]
