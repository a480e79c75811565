"""The withdrawal policy's values (walletcore.domain.policies): the document and its
checks, which version is in force and when a change takes effect, the allowlist's match,
and an approval's moves."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.policies import (
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Destination,
    Origin,
    Policy,
    PolicyVersion,
    Transfer,
    WalletKind,
    effective_at,
    in_force,
    pending,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "policies.md"


def version(n: int, at: datetime, delay: int = 3600, **document: Any) -> PolicyVersion:
    policy = Policy.parse({"changeDelaySeconds": delay, **document})
    return PolicyVersion("c", n, policy, at, at, "test")


def transfer(**changes: Any) -> Transfer:
    base = Transfer(
        wallet=WalletKind.USER,
        origin=Origin.SEND,
        user_id="u",
        chain=Chain.ETHEREUM,
        asset_id=2,
        symbol="ETH",
        decimals=18,
        amount_units=5 * 10**17,
        recipient="0xAbC",
        destination=Destination.OTHER,
    )
    return replace(base, **changes)


# -- the document --------------------------------------------------------------------------
def test_the_example_of_the_docs_is_a_valid_policy() -> None:
    example = re.search(r"```json\n(.*?)```", DOCS.read_text(), re.DOTALL)
    assert example is not None
    policy = Policy.parse(json.loads(example.group(1)))
    assert policy.default == "deny"
    assert [r.name for r in policy.rules][:2] == ["own-or-allowlisted", "big-needs-two"]
    # it reads back as it was written
    assert Policy.parse(policy.document()) == policy


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"rules": [{"name": "a", "wallet": "user"}]}, "rules.0.action: Field required"),
        ({"rules": [{"name": "a", "wallet": "user", "action": "deny", "x": 1}]}, "rules.0.x"),
        ({"rules": [{"name": "a b", "wallet": "user", "action": "deny"}]}, "rule name 'a b'"),
        (
            {"rules": [{"name": "a", "wallet": "user", "action": "deny", "approvals": 2}]},
            "'approvals' (how many operators) goes with require_approval",
        ),
        (
            {"rules": [{"name": "a", "wallet": "user", "action": "deny", "chains": []}]},
            "chains is empty",
        ),
        (
            {
                "rules": [
                    {"name": "a", "wallet": "user", "action": "deny"},
                    {"name": "a", "wallet": "platform", "action": "deny"},
                ]
            },
            "two rules are named a",
        ),
        (
            {"rules": [{"name": "a", "wallet": "user", "action": "deny", "over": {"amount": "1"}}]},
            "give exactly one of assetId and fiat",
        ),
        (
            {
                "rules": [
                    {
                        "name": "a",
                        "wallet": "user",
                        "action": "deny",
                        "over": {"amount": "-1", "fiat": "USD"},
                    }
                ]
            },
            "rules.0.over.amount",
        ),
        ({"changeDelaySeconds": 10**9}, "changeDelaySeconds"),
        ({"default": "maybe"}, "default"),
        ([], "policy"),
    ],
)
def test_a_bad_document_is_refused_naming_the_problem(document: Any, problem: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Policy.parse(document)
    assert caught.value.status == 400
    assert caught.value.message.startswith("Invalid policy: ")
    assert problem in caught.value.message


def test_the_defaults_guard() -> None:
    policy = Policy.parse({})
    assert (policy.default, policy.change_delay_seconds, policy.cooling_off_seconds) == (
        "deny",
        86_400,
        86_400,
    )


# -- versions -------------------------------------------------------------------------------
def test_the_version_in_force_is_the_latest_already_effective() -> None:
    first = version(1, T0)
    second = replace(version(2, T0 + timedelta(minutes=1)), effective_at=T0 + timedelta(hours=1))
    versions = [first, second]
    assert in_force(versions, T0 + timedelta(minutes=30)) == first
    assert pending(versions, T0 + timedelta(minutes=30)) == [second]
    assert in_force(versions, T0 + timedelta(hours=1)) == second
    assert pending(versions, T0 + timedelta(hours=1)) == []
    assert in_force([], T0) is None


def test_a_change_waits_the_longest_delay_of_the_version_in_force_and_those_pending() -> None:
    assert effective_at([], T0) == T0  # the first policy: at once
    strict = version(1, T0, delay=3600)
    assert effective_at([strict], T0) == T0 + timedelta(hours=1)
    # a pending version with no delay does not shorten the next change
    loose = replace(version(2, T0, delay=0), effective_at=T0 + timedelta(hours=1))
    assert effective_at([strict, loose], T0) == T0 + timedelta(hours=1)
    # once in force, its own delay applies
    later = T0 + timedelta(hours=2)
    assert effective_at([strict, loose], later) == later


@given(
    delays=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=5),
    elapsed=st.integers(min_value=0, max_value=10**6),
)
def test_no_change_takes_effect_sooner_than_the_delay_in_force(
    delays: list[int], elapsed: int
) -> None:
    """Whatever versions were set, a new one never takes effect before the delay of the
    version in force has passed."""
    versions: list[PolicyVersion] = []
    now = T0
    for n, delay in enumerate(delays, start=1):
        starts = effective_at(versions, now)
        versions.append(replace(version(n, now, delay=delay), set_at=now, effective_at=starts))
        now += timedelta(seconds=elapsed // len(delays))
    current = in_force(versions, now)
    assert current is not None
    starts = effective_at(versions, now)
    assert starts >= now + timedelta(seconds=current.policy.change_delay_seconds)


# -- the allowlist and rules' filters --------------------------------------------------------
def test_an_allowlist_entry_covers_its_chain_asset_and_address_after_its_cooling_off() -> None:
    entry = AllowlistEntry("c", Chain.ETHEREUM, "0xAbC", "Treasury", T0, T0 + timedelta(hours=1))
    later = T0 + timedelta(hours=1)
    assert entry.covers(Chain.ETHEREUM, 21, "0xabc", later)  # any asset, any case
    assert not entry.covers(Chain.ETHEREUM, 21, "0xabc", T0)  # cooling off
    assert not entry.covers(Chain.BSC, 21, "0xabc", later)
    assert not entry.covers(Chain.ETHEREUM, 21, "0xabd", later)
    one_asset = replace(entry, asset_id=22)
    assert one_asset.covers(Chain.ETHEREUM, 22, "0xAbC", later)
    assert not one_asset.covers(Chain.ETHEREUM, 21, "0xAbC", later)
    bitcoin = AllowlistEntry("c", Chain.BITCOIN, "bc1qab", "Cold", T0, T0)
    assert not bitcoin.covers(Chain.BITCOIN, 1, "BC1QAB", T0)  # case matters off EVM


def test_a_rule_selects_by_wallet_origin_chain_asset_and_destination() -> None:
    rule = Policy.parse(
        {
            "rules": [
                {
                    "name": "r",
                    "wallet": "user",
                    "action": "deny",
                    "origins": ["send"],
                    "chains": ["ETHEREUM"],
                    "assetIds": [2],
                    "destinations": ["other"],
                }
            ]
        }
    ).rules[0]
    assert rule.selects(transfer())
    assert not rule.selects(transfer(wallet=WalletKind.PLATFORM))
    assert not rule.selects(transfer(origin=Origin.COLLECTION))
    assert not rule.selects(transfer(chain=Chain.BSC))
    assert not rule.selects(transfer(asset_id=21))
    assert not rule.selects(transfer(destination=Destination.OWN))


# -- approvals ------------------------------------------------------------------------------
def approval(**changes: Any) -> Approval:
    base = Approval(
        id="apr_1",
        client_id="c",
        request_id="r",
        rule="big",
        required=2,
        initiated_by="client:c",
        transfer=transfer(),
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )
    return replace(base, **changes)


def test_an_approval_needs_distinct_operators_none_its_initiator() -> None:
    held = approval(initiated_by="alice")
    with pytest.raises(InvalidRequest, match="never approves a transfer they initiated"):
        held.approved_by("alice", T0)
    once = held.approved_by("bob", T0)
    assert (once.status, once.approvers) == (ApprovalStatus.PENDING, ("bob",))
    with pytest.raises(InvalidRequest, match="bob has approved apr_1 already"):
        once.approved_by("bob", T0)
    twice = once.approved_by("carol", T0)
    assert (twice.status, twice.decided_at) == (ApprovalStatus.APPROVED, T0)
    with pytest.raises(InvalidRequest, match="is approved, not pending"):
        twice.approved_by("dave", T0)


def test_one_rejection_ends_an_approval_and_time_runs_out() -> None:
    rejected = approval().approved_by("bob", T0).rejected_by("carol", T0, "who is this")
    assert (rejected.status, rejected.reason) == (
        ApprovalStatus.REJECTED,
        "rejected by carol: who is this",
    )
    late = T0 + timedelta(hours=1)
    assert approval().effective_status(late) is ApprovalStatus.EXPIRED
    with pytest.raises(InvalidRequest, match="expired"):
        approval().approved_by("bob", late)
    assert approval().expired(late).status is ApprovalStatus.EXPIRED


def test_a_documents_sets_are_sorted_so_its_digest_is_the_same_in_every_process() -> None:
    import subprocess
    import sys

    script = (
        "from walletcore.domain.policies import Policy\n"
        "p = Policy.parse({'rules': [{'name': 'a', 'wallet': 'user', 'action': 'allow',"
        " 'origins': ['send', 'collection', 'delivery', 'platform_send'],"
        " 'chains': ['TRON', 'BITCOIN', 'ETHEREUM', 'SOLANA'], 'assetIds': [22, 2, 1],"
        " 'destinations': ['own', 'allowlisted', 'other']}]})\n"
        "print(p.digest(), p.document()['rules'][0]['origins'])\n"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert len(seen) == 1
    assert seen.pop().split(" ", 1)[1].strip() == (
        "['collection', 'delivery', 'platform_send', 'send']"
    )
