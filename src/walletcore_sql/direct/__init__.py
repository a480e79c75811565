"""The stores' units of work sent straight to the driver: the statements SQLAlchemy
compiled, without its execution machinery.

Sent through SQLAlchemy's engine, one read of ten trades cost ~300 µs of Python over the ~100 µs
asyncpg itself takes (a `Connection` with its event dispatch, the execution context, the greenlet
hop, the cursor emulation, the result proxy; docs/performance.md, "The stores on the driver"). The
units of `SqlStorage.read()` and `.write()` keep what matters of SQLAlchemy and drop the rest:

- the SQL is SQLAlchemy's own compilation of the stores' statements for the engine's
  dialect (casts, `trimmed_money`, binds in order; an INSERT or UPDATE for the columns it
  is given), made once per statement (`plans`);
- the parameters go through the same bind processors, the rows through the same result
  processors (picked, as SQLAlchemy picks them, by the column's type; `results`);
- PostgreSQL (`postgres`: `PgReader`, `PgWriter`, `execute_alone`): the connection comes
  from (and goes back to) asyncpg's own pool (`pool.DriverPool`, which keeps one given back for the
  next unit a moment, docs/performance.md, "The stores on the driver"), connected as SQLAlchemy's
  engine connects, and asyncpg's prepared-statement cache serves it. SQLAlchemy's pool ran its
  checkout and its return in a greenlet each (a 16 KiB Python stack mapped and unmapped each time)
  and through its pool events: about a sixth of a quote + approve's CPU in the process
  (docs/performance.md, "The stores on the driver"). A quote and a move of a trade that queue while
  their lanes are busy are sent together (`pg_group`, on the group commit both dialects share,
  `group`);
- SQLite (`sqlite`: `InlineRaw`): the pysqlite connection of the unit, inside the
  transaction (or group-commit savepoint) SQLAlchemy opened for it;
- a driver error leaves as the port's error (`walletcore_sql.errors.port_error`, the one
  map of the SQL storage).

Everything else (nonce leases and floors, migrations, health checks) uses SQLAlchemy's
engine, with a small pool of its own; and so does everything with the fast paths off
(`SqlStorage(..., direct=False)`), the reference the storage contract checks them against.
"""

from walletcore_sql.direct.group import GroupCommit, Waiting
from walletcore_sql.direct.pg_group import GROUP_LANES, GROUP_MOST, PgGroupCommit
from walletcore_sql.direct.plans import Batch, Plan, Positional, plan_of
from walletcore_sql.direct.pool import DriverPool
from walletcore_sql.direct.postgres import PgReader, PgWriter, execute_alone
from walletcore_sql.direct.results import RawResult
from walletcore_sql.direct.sqlite import InlineRaw

__all__ = [
    "GROUP_LANES",
    "GROUP_MOST",
    "Batch",
    "DriverPool",
    "GroupCommit",
    "InlineRaw",
    "PgGroupCommit",
    "PgReader",
    "PgWriter",
    "Plan",
    "Positional",
    "RawResult",
    "Waiting",
    "execute_alone",
    "plan_of",
]
