"""The deployment's database URL, from the SQLAlchemy form to libpq's (psycopg)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def libpq_url(url: str) -> str:
    """`postgresql+asyncpg://user:pw@host:5432/db` -> `postgresql://user:pw@host:5432/db`.

    The driver suffix goes; user, password, host, port, database and libpq query options
    (`sslmode=require`) stay. asyncpg's `ssl=` spelling becomes libpq's `sslmode=`.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {scheme}://...")
    query = "&".join(
        f"sslmode={item.split('=', 1)[1]}" if item.startswith("ssl=") else item
        for item in parts.query.split("&")
        if item
    )
    return urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment))


__all__ = ["libpq_url"]
