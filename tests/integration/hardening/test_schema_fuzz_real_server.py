"""Schemathesis against the real server process on PostgreSQL.

The schema is the one the running server serves (`/schema/openapi.json`, loaded with
`schemathesis.openapi.from_url`), and every generated case goes over real HTTP to
`walletcore serve` (granian, two workers, WALLETCORE_REPO=sql on a throwaway PostgreSQL
database): the JSON reader, the middleware and the SQL repo are the production ones.

Every operation runs schemathesis's phases (explicit examples, coverage, then fuzzing in
positive and negative modes), derandomized, with every check on. `positive_data_acceptance`
is judged as in the in-process run (tests/integration/http/
test_http_schema_fuzz.py), by the one shared `accepted_unless_a_business_rule`
(tests/schema_business_rules.py): schema-valid input is accepted, or refused by one of the
`BUSINESS_RULES` a schema cannot state, each with its reason (an unknown user is a 404,
acceptance as in schemathesis' default). `not_a_server_error` accepts 503 besides 2xx-4xx:
the contract's documented answer of the platform endpoints for the assets flagged on them
(42, 51, 61); a 500 is always a failure, and every status must be documented
(`status_code_conformance`).

Authenticated as an api client of its own ("Fuzz", platform wallet provisioned), with a
token refreshed a minute before its 15 minutes run out (`Client.token`). `/create` (Argon2id
at its production cost, ~0.4 s a wallet) gets fewer examples than the others.

The number of cases each operation ran is printed and checked by the last test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hardening_support import Client, Server, add_client
from hypothesis import HealthCheck, settings
from schema_business_rules import accepted_unless_a_business_rule
from schemathesis.specs.openapi.checks import positive_data_acceptance

pytestmark = pytest.mark.postgres

#: Examples per operation and mode (hypothesis `max_examples`), before the coverage phase's
#: own cases: about 7,900 cases over the 31 operations, a minute or two on two cores.
MAX_EXAMPLES = 200
#: `/create` hashes a password with Argon2id (64 MiB) on every positive case.
CREATE_EXAMPLES = 15
#: At least this many cases must have run (a guard against a silently empty run).
MIN_CASES = 5_000
#: ... and this many of them schema-valid (positive mode: `positive_data_acceptance` judges
#: them), about half.
MIN_POSITIVE_CASES = 2_000

RUN: Counter[str] = Counter()
POSITIVE: Counter[str] = Counter()


@pytest.fixture(scope="module")
def fuzz_client(pg_server: Server) -> Client:
    return add_client(pg_server, "Fuzz", fee_payer="PLATFORM", platform=True)


@pytest.fixture(scope="module")
def served_schema(pg_server: Server, fuzz_client: Client) -> Iterator[Any]:
    loaded = schemathesis.openapi.from_url(f"{pg_server.base}/schema/openapi.json", timeout=30)
    loaded.config.checks.not_a_server_error.expected_statuses = ["2xx", "3xx", "4xx", "503"]
    yield loaded


schema = schemathesis.pytest.from_fixture("served_schema")


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    """Schemathesis 4's fixture loader renames the test node through `node._nodeid`, an
    attribute pytest 9 no longer has (the reason tests/integration/http fuzzes in-process
    with a module-level app): give it one to read and write."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": list(HealthCheck),
    "database": None,
}


def run_case(case: Any, pg_server: Server, fuzz_client: Client) -> None:
    pg_server.ensure_running()
    headers = {}
    if case.path != "/auth":
        headers["Authorization"] = f"Bearer {fuzz_client.token(pg_server.base)}"
    RUN[case.operation.label] += 1
    if case.meta is not None and case.meta.generation.mode.is_positive:
        POSITIVE[case.operation.label] += 1
    case.call_and_validate(
        base_url=pg_server.base,
        headers=headers,
        # schemathesis's own check, with the refusals of `BUSINESS_RULES` excused
        excluded_checks=[positive_data_acceptance],
        additional_checks=[accepted_unless_a_business_rule],
        timeout=60,
    )


@schema.exclude(path="/create").parametrize()
@settings(max_examples=MAX_EXAMPLES, **_SETTINGS)
def test_every_operation_over_real_http(case: Any, pg_server: Server, fuzz_client: Client) -> None:
    run_case(case, pg_server, fuzz_client)


@schema.include(path="/create").parametrize()
@settings(max_examples=CREATE_EXAMPLES, **_SETTINGS)
def test_create_over_real_http(case: Any, pg_server: Server, fuzz_client: Client) -> None:
    run_case(case, pg_server, fuzz_client)


def test_the_fuzzing_ran_enough_cases(pg_server: Server) -> None:
    total, positive = sum(RUN.values()), sum(POSITIVE.values())
    summary = ", ".join(f"{label}: {n} ({POSITIVE[label]} +)" for label, n in sorted(RUN.items()))
    print(
        f"\nschemathesis cases against the real server: {total}, {positive} schema-valid "
        f"(+) ({summary})"
    )
    assert len(RUN) == 31, sorted(RUN)
    assert total >= MIN_CASES, summary
    assert positive >= MIN_POSITIVE_CASES, summary
    assert pg_server.alive() and pg_server.restarts == 0 and pg_server.answers()
