"""Steps of features/withdrawal_policies.feature.

The core on its fakes: the in-memory storage, a manual clock, the FAKE KeyStore, the
sandbox prices and followed fake chains (`walletcore.testing.chains`) that move a
transfer's coins when they accept it. What the scenarios read back is what the fakes saw:
the balances on the fake chain, the transfers prepared from a wallet and accepted by the
chain, the answers, the audit log and the event feed.

A policy is written as a table (rule, transfers, decision), with the settings said in
words after it ("the policy's default is to send", "a change of the policy waits 1 hour");
the operator sets the policy the scenario drafted just before the first step that acts
(a send, an allowlisting, a change). "The operator" sets policies and the allowlist as
`operator`; Alice, Bob and Carol are operators who authenticate with their key, as the
approval commands do.

Rules:
- the `transfers` words of a policy table are read by `rule_of`; words it does not know
  fail the scenario (a typo never widens a rule);
- "the same request again" is the last send, with its X-Request-Id, body and password;
- a transfer the user's app asks for is initiated by the api client, never by an
  operator: "a transfer held for approval that Alice initiated" is that transfer's
  approval as an operator-initiated one would be (`Approval.approved_by`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dependency_injector import providers
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore import Caller, Container, DomainError, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_CHAINS, Asset, Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.money import format_balance, to_base_units
from walletcore.domain.policies import Approval
from walletcore.services.policies import Policies
from walletcore.services.send_record import SendReceipt
from walletcore.services.sends import HeldReceipt
from walletcore.testing import CONTRACT_CATALOG, FakeKeyStore, InMemoryStorage, autocommit
from walletcore.testing.chains import FollowedFakeGateway
from walletcore.testing.keys import fake_address

scenarios("withdrawal_policies.feature")

PASSWORD = "correct horse battery"
ASSETS = {a.symbol: a for a in CONTRACT_CATALOG.assets if a.chain is Chain.ETHEREUM}
ETH, USDT = ASSETS["ETH"], ASSETS["USDT"]
#: addresses no wallet here owns
PLACES = {
    "the cold wallet": fake_address(b"\x01" * 8, Chain.ETHEREUM),
    "a stranger": fake_address(b"\x02" * 8, Chain.ETHEREUM),
    "the exchange": fake_address(b"\x03" * 8, Chain.ETHEREUM),
}
#: who "the operator" is in the audit log
OPERATOR = "operator"
#: the outcome of a `policy.decide` entry, in the feature's words
DECIDED = {"ok": "sent", "403": "refused", "202": "held"}
#: a rule's target in the audit log, in the feature's words
RULE_WORDS = {"the default": "(default)", "no policy": "(no policy)"}


@dataclass
class Wallets:
    container: Container
    clock: ManualClock
    storage: InMemoryStorage
    chain: FollowedFakeGateway
    client: ApiClient | None = None
    #: "the user", "another user" -> user id
    users: dict[str, str] = field(default_factory=dict)
    #: "the user", "another user", "the platform wallet" -> ETHEREUM address
    addresses: dict[str, str] = field(default_factory=dict)
    #: the policy the scenario drafts, set before the first step that acts
    draft: dict[str, Any] | None = None
    operators: dict[str, str] = field(default_factory=dict)  # name -> key
    requests: int = 0
    #: the last send: (who, request id, asset, amount, recipient)
    last: tuple[str, str, Asset, str, str] | None = None
    answer: Any = None
    error: DomainError | None = None
    approval: Approval | None = None
    approval_error: DomainError | None = None
    #: "a transfer held for approval that Alice initiated"
    own: Approval | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    @property
    def policies(self) -> Policies:
        found: Policies = self.container.policies()
        return found

    @property
    def client_id(self) -> str:
        assert self.client is not None
        return self.client.client_id

    def caller(self, request_id: str | None = None) -> Caller:
        assert self.client is not None
        self.requests += 1
        return Caller(self.client, request_id or f"req-{self.requests:04d}")

    def enact(self) -> None:
        """The drafted policy, set by the operator (once)."""
        if self.draft is not None:
            draft, self.draft = self.draft, None
            self.run(self.policies.set_policy(self.client_id, draft, set_by=OPERATOR))

    def attempt(self, work: Any) -> None:
        self.answer, self.error = None, None
        try:
            self.answer = self.run(work)
        except DomainError as exc:
            self.error = exc

    def audit(self, action: str) -> list[AuditEntry]:
        entries: list[AuditEntry] = self.run(autocommit(self.storage).audit.newest(10_000))
        return [e for e in reversed(entries) if e.action == action]

    def held(self) -> Approval:
        """The stored approval of the last send (as it stands now)."""
        assert self.last is not None, "nothing was sent"
        listed: list[Approval] = self.run(self.policies.approvals(client_id=self.client_id))
        found = [a for a in listed if a.request_id == self.last[1]]
        assert len(found) == 1, "the last transfer was not held for approval"
        return found[0]

    def balance(self, address: str, asset: Asset) -> str:
        units = self.chain.balances.get((address.lower(), asset.id), 0)
        return format_balance(units, asset.decimals)


@pytest.fixture
def wallets(tmp_path: Any) -> Iterator[Wallets]:
    clock = ManualClock()
    storage = InMemoryStorage()
    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    container = create_container(
        Settings(home=tmp_path, repo="memory"),
        clock=clock,
        storage=storage,
        keystore=FakeKeyStore(),
    )
    container.gateways.override(providers.Object(gateways))
    world = Wallets(container, clock, storage, gateways[Chain.ETHEREUM])
    yield world
    world.loop.close()


def units(amount: str, asset: Asset) -> int:
    return to_base_units(Decimal(amount), asset.decimals)


def seconds_of(text: str) -> int:
    """`1 hour`, `59 minutes and 59 seconds`, `1 day`."""
    sizes = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
    total = 0
    for part in re.split(r"\s+and\s+|,\s*", text.strip()):
        found = re.fullmatch(r"(\d+) (second|minute|hour|day)s?", part)
        assert found, f"cannot read the duration {text!r}"
        total += int(found.group(1)) * sizes[found.group(2)]
    return total


# -- the policy in words ----------------------------------------------------------------
_WALLETS = {"from a user's wallet": "user", "from the platform wallet": "platform"}
_AMOUNT = r"(?P<amount>\d+(?:\.\d+)?) (?P<unit>[A-Z]+)"
_DURATION = (
    r"(?P<window>\d+ (?:second|minute|hour|day)s?(?: and \d+ (?:second|minute|hour|day)s?)*)"
)
_CONDITIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"of (?P<assets>[A-Z]+(?: and [A-Z]+)*)"), "assets"),
    (re.compile(r"to an allowlisted address"), "allowlisted"),
    (re.compile(rf"over {_AMOUNT}"), "over"),
    (
        re.compile(
            rf"taking (?P<per>the user's|the api client's) total over {_AMOUNT} in {_DURATION}"
        ),
        "velocity",
    ),
]


def measure(amount: str, unit: str) -> dict[str, Any]:
    if unit in ASSETS:
        return {"amount": amount, "assetId": ASSETS[unit].id}
    return {"amount": amount, "fiat": unit}


def rule_of(name: str, transfers: str, decision: str) -> dict[str, Any]:
    """One row of a policy table as the operator's document writes it."""
    rule: dict[str, Any] = {"name": name}
    text = transfers.strip()
    for words, wallet in _WALLETS.items():
        if text.startswith(words):
            rule["wallet"], text = wallet, text[len(words) :]
            break
    else:
        raise AssertionError(f"{transfers!r}: say which wallet the transfers leave")
    while text:
        text = text.removeprefix(",").lstrip()
        for pattern, kind in _CONDITIONS:
            found = pattern.match(text)
            if found is None:
                continue
            text = text[found.end() :]
            if kind == "assets":
                rule["assetIds"] = [ASSETS[s].id for s in found["assets"].split(" and ")]
            elif kind == "allowlisted":
                rule["destinations"] = ["allowlisted"]
            elif kind == "over":
                rule["over"] = measure(found["amount"], found["unit"])
            else:
                rule["velocity"] = {
                    **measure(found["amount"], found["unit"]),
                    "windowSeconds": seconds_of(found["window"]),
                    "per": "user" if found["per"] == "the user's" else "client",
                }
            break
        else:
            raise AssertionError(f"{transfers!r}: cannot read {text!r}")
    held = re.fullmatch(r"hold for (\d+) approvals?", decision.strip())
    if held:
        rule["action"], rule["approvals"] = "require_approval", int(held.group(1))
    else:
        rule["action"] = {"send": "allow", "refuse": "deny"}[decision.strip()]
    return rule


def policy_of(datatable: list[list[str]]) -> dict[str, Any]:
    header, *rows = datatable
    assert header == ["rule", "transfers", "decision"], header
    return {"rules": [rule_of(*row) for row in rows]}


def recipient(world: Wallets, whom: str) -> str:
    return PLACES[whom] if whom in PLACES else world.addresses[whom]


# -- given ------------------------------------------------------------------------------
@given("an api client enabled for ETH and USDT")
def api_client(wallets: Wallets) -> None:
    auth = wallets.container.auth()
    issued = wallets.run(auth.create_client("Acme Pay", assets=[ETH.id, USDT.id]))
    wallets.client = issued.client


def _holdings(wallets: Wallets, address: str, holdings: str) -> None:
    for held in re.split(r"\s+and\s+", holdings):
        amount, symbol = held.split()
        wallets.chain.fund(address, ASSETS[symbol], units(amount, ASSETS[symbol]))


@given(parsers.re(r"(?P<who>a user|another user) whose wallet holds (?P<holdings>.+)$"))
def user(wallets: Wallets, who: str, holdings: str) -> None:
    name = "the user" if who == "a user" else who
    created = wallets.run(wallets.container.wallets().create(wallets.caller(), password=PASSWORD))
    wallets.users[name] = str(created.user_id)
    wallets.addresses[name] = created.addresses[Chain.ETHEREUM]
    _holdings(wallets, wallets.addresses[name], holdings)


@given(parsers.parse("the api client's platform wallet holds {holdings}"))
def platform(wallets: Wallets, holdings: str) -> None:
    made = wallets.run(wallets.container.wallets().provision_platform(wallets.client_id))
    wallets.addresses["the platform wallet"] = made[Chain.ETHEREUM]
    _holdings(wallets, made[Chain.ETHEREUM], holdings)


@given("the api client's withdrawal policy:")
def drafted(wallets: Wallets, datatable: list[list[str]]) -> None:
    assert wallets.draft is None, "one policy per scenario"
    wallets.draft = policy_of(datatable)


def _setting(wallets: Wallets, name: str, value: Any) -> None:
    assert wallets.draft is not None, "say the policy's rules first"
    wallets.draft[name] = value


@given("the policy's default is to send")
def default_send(wallets: Wallets) -> None:
    _setting(wallets, "default", "allow")


@given(parsers.parse("a newly allowlisted address cools off for {duration}"))
def cooling_off(wallets: Wallets, duration: str) -> None:
    _setting(wallets, "coolingOffSeconds", seconds_of(duration))


@given(parsers.parse("a change of the policy waits {duration}"))
def change_delay(wallets: Wallets, duration: str) -> None:
    _setting(wallets, "changeDelaySeconds", seconds_of(duration))


@given(parsers.parse("a held transfer waits at most {duration} for its approvals"))
def approval_ttl(wallets: Wallets, duration: str) -> None:
    _setting(wallets, "approvalTtlSeconds", seconds_of(duration))


@given(parsers.re(r"the operators (?P<names>\w+(?:, \w+)*(?: and \w+)?)$"))
def operators(wallets: Wallets, names: str) -> None:
    for name in re.split(r",\s*|\s+and\s+", names):
        _, key = wallets.run(wallets.policies.add_operator(name))
        wallets.operators[name] = key


@given(
    parsers.parse('the operator allowlisted {whom} as "{label}", and its cooling-off has passed')
)
def allowlisted(wallets: Wallets, whom: str, label: str) -> None:
    wallets.enact()
    entry = wallets.run(
        wallets.policies.allow_address(
            wallets.client_id, Chain.ETHEREUM, PLACES[whom], label, asset_id=None, by=OPERATOR
        )
    )
    assert entry.usable_at > wallets.clock.now(), "an address waits for its cooling-off"
    wallets.clock.set(entry.usable_at)


@given("a transfer held for approval that Alice initiated")
def initiated_by_alice(wallets: Wallets) -> None:
    send(wallets, "the user", "0.6", "ETH", "the exchange")
    assert isinstance(wallets.answer, HeldReceipt), wallets.error or wallets.answer
    wallets.own = replace(wallets.answer.approval, initiated_by="Alice")


# -- when -------------------------------------------------------------------------------
@when(parsers.parse('the operator allowlists {whom} as "{label}"'))
def allowlist(wallets: Wallets, whom: str, label: str) -> None:
    wallets.enact()
    wallets.run(
        wallets.policies.allow_address(
            wallets.client_id, Chain.ETHEREUM, PLACES[whom], label, asset_id=None, by=OPERATOR
        )
    )


@when(parsers.parse("the operator removes {whom} from the allowlist"))
def disallow(wallets: Wallets, whom: str) -> None:
    wallets.enact()
    wallets.run(
        wallets.policies.disallow_address(
            wallets.client_id, Chain.ETHEREUM, PLACES[whom], asset_id=None, by=OPERATOR
        )
    )


@when("the operator changes the policy to:")
def change(wallets: Wallets, datatable: list[list[str]]) -> None:
    wallets.enact()
    document = policy_of(datatable)
    wallets.run(wallets.policies.set_policy(wallets.client_id, document, set_by=OPERATOR))


@when("the operator cancels the pending change")
def cancel(wallets: Wallets) -> None:
    overview = wallets.run(wallets.policies.overview(wallets.client_id))
    (pending,) = overview.pending
    wallets.run(wallets.policies.cancel_policy(wallets.client_id, pending.version, by=OPERATOR))


@when(parsers.re(r"(?P<duration>\d+ (?:second|minute|hour|day)s?(?: and .+?)?) pass(?:es)?$"))
def time_passes(wallets: Wallets, duration: str) -> None:
    wallets.clock.advance(seconds_of(duration))


def send(wallets: Wallets, who: str, amount: str, symbol: str, whom: str) -> None:
    wallets.enact()
    asset = ASSETS[symbol]
    request_id = f"pay-{wallets.requests + 1:04d}"
    wallets.last = (who, request_id, asset, amount, recipient(wallets, whom))
    _send_last(wallets)


def _send_last(wallets: Wallets) -> None:
    assert wallets.last is not None, "nothing was sent"
    who, request_id, asset, amount, to = wallets.last
    sends = wallets.container.sends()
    if who == "the platform wallet":
        work = sends.platform_send(
            wallets.caller(request_id),
            request_id=request_id,
            asset_id=asset.id,
            recipient=to,
            amount=amount,
        )
    else:
        work = sends.send(
            wallets.caller(request_id),
            request_id=request_id,
            user_id=wallets.users[who],
            asset_id=asset.id,
            recipient=to,
            amount=amount,
            password=PASSWORD,
        )
    wallets.attempt(work)


@when(
    parsers.re(
        r"(?P<who>the user|another user) sends (?P<amount>[\d.]+) (?P<symbol>[A-Z]+) "
        r"to (?P<whom>.+)$"
    )
)
def user_sends(wallets: Wallets, who: str, amount: str, symbol: str, whom: str) -> None:
    send(wallets, who, amount, symbol, whom)


@when(
    parsers.re(
        r"the api client sends (?P<amount>[\d.]+) (?P<symbol>[A-Z]+) from the platform "
        r"wallet to (?P<whom>.+)$"
    )
)
def platform_sends(wallets: Wallets, amount: str, symbol: str, whom: str) -> None:
    send(wallets, "the platform wallet", amount, symbol, whom)


@when("the user sends the same request again")
def again(wallets: Wallets) -> None:
    _send_last(wallets)


def _decide(wallets: Wallets, name: str, how: str, reason: str = "") -> None:
    policies = wallets.policies
    operator = wallets.run(policies.authenticate(name, wallets.operators[name]))
    approval_id = wallets.held().id
    work = (
        policies.approve(approval_id, operator)
        if how == "approves"
        else policies.reject(approval_id, operator, reason)
    )
    wallets.approval, wallets.approval_error = None, None
    try:
        wallets.approval = wallets.run(work)
    except DomainError as exc:
        wallets.approval_error = exc


@when(parsers.parse("{name} approves the transfer"))
def approves(wallets: Wallets, name: str) -> None:
    _decide(wallets, name, "approves")


@when(parsers.parse('{name} rejects the transfer, because "{reason}"'))
def rejects(wallets: Wallets, name: str, reason: str) -> None:
    _decide(wallets, name, "rejects", reason)


@when(parsers.re(r"(?P<name>\w+) approves the transfer (?:she|Alice) initiated$"))
def approves_own(wallets: Wallets, name: str) -> None:
    assert wallets.own is not None
    wallets.approval_error = None
    try:
        wallets.own = wallets.own.approved_by(name, wallets.clock.now())
    except InvalidRequest as exc:
        wallets.approval_error = exc


# -- then -------------------------------------------------------------------------------
def _accepted_from(wallets: Wallets, address: str) -> list[dict[str, Any]]:
    return [b for b in wallets.chain.accepted.values() if b["from"].lower() == address.lower()]


def _prepared_from(wallets: Wallets, address: str) -> list[Any]:
    return [u for u in wallets.chain.prepared if u.transfer.sender.lower() == address.lower()]


@then("the transfer is sent")
def sent(wallets: Wallets) -> None:
    assert wallets.error is None, wallets.error
    assert isinstance(wallets.answer, SendReceipt), wallets.answer
    body = wallets.chain.accepted[wallets.answer.tx_hash]
    assert wallets.last is not None
    _, _, asset, amount, to = wallets.last
    assert (body["asset"], body["to"].lower()) == (asset.id, to.lower())
    # the whole amount, or (a user's native coin) the amount less the fee taken from it
    assert body["amount"] in (units(amount, asset), units(amount, asset) - body["fee"]), body


@then(
    parsers.re(
        r'the transfer is refused by the rule "(?P<rule>[^"]+)"(?:, because "(?P<why>[^"]+)")?$'
    )
)
def refused(wallets: Wallets, rule: str, why: str | None) -> None:
    assert wallets.error is not None, f"expected a refusal, got {wallets.answer!r}"
    assert wallets.error.status == 403, wallets.error
    prefix = f"Transfer refused by withdrawal policy rule {rule}: "
    assert wallets.error.message.startswith(prefix), wallets.error.message
    if why is not None:
        assert why in wallets.error.message.removeprefix(prefix), wallets.error.message


@then(parsers.parse('the transfer is refused with the message "{message}"'))
def refused_with(wallets: Wallets, message: str) -> None:
    assert wallets.error is not None, f"expected a refusal, got {wallets.answer!r}"
    assert (wallets.error.status, wallets.error.message) == (403, message)


@then(parsers.re(r"nothing has left (?P<whose>the user's wallet|the platform wallet)$"))
def nothing_left(wallets: Wallets, whose: str) -> None:
    address = wallets.addresses["the user" if whose == "the user's wallet" else whose]
    assert _prepared_from(wallets, address) == [], "a transfer was prepared from the wallet"
    assert _accepted_from(wallets, address) == []


@then("exactly one transfer has left the user's wallet")
def one_left(wallets: Wallets) -> None:
    address = wallets.addresses["the user"]
    assert len(_prepared_from(wallets, address)) == 1
    assert len({b["nonce"] for b in _accepted_from(wallets, address)}) == 1


@then(parsers.parse("the user's wallet still holds {holdings}"))
def still_holds(wallets: Wallets, holdings: str) -> None:
    for held in re.split(r"\s+and\s+", holdings):
        amount, symbol = held.split()
        assert wallets.balance(wallets.addresses["the user"], ASSETS[symbol]) == amount


@then(parsers.re(r"(?P<whom>the cold wallet|the exchange|a stranger) has received (?P<what>.+)$"))
def received(wallets: Wallets, whom: str, what: str) -> None:
    for held in re.split(r"\s+and\s+", what):
        amount, symbol = held.split()
        assert wallets.balance(PLACES[whom], ASSETS[symbol]) == amount, symbol


@then(parsers.parse('the api client\'s allowlist shows {whom} labelled "{label}"'))
def allowlist_shows(wallets: Wallets, whom: str, label: str) -> None:
    overview = wallets.run(wallets.policies.overview(wallets.client_id))
    assert [(e.address.lower(), e.label) for e in overview.allowlist] == [
        (PLACES[whom].lower(), label)
    ]


@then(
    parsers.re(
        r'the transfer waits for (?P<required>\d+) approvals under the rule "(?P<rule>[^"]+)", '
        r"with (?P<count>\d+) so far$"
    ),
    converters={"required": int, "count": int},
)
def waits(wallets: Wallets, required: int, rule: str, count: int) -> None:
    assert wallets.error is None, wallets.error
    assert isinstance(wallets.answer, HeldReceipt), wallets.answer
    shown = wallets.answer.as_result()
    assert (shown["status"], shown["txHash"], shown["rule"]) == ("awaiting_approval", None, rule)
    assert (shown["required"], shown["approvals"]) == (required, count)


@then("the transfer was initiated by the api client, so any of the operators may approve it")
def initiated_by_client(wallets: Wallets) -> None:
    initiator = wallets.held().initiated_by
    assert initiator == f"client:{wallets.client_id}"
    operators = wallets.run(wallets.policies.operators())
    assert {o.name for o in operators} == set(wallets.operators)
    assert initiator not in wallets.operators


@then(parsers.re(r"the transfer has (?P<count>\d+) approvals? of (?P<required>\d+)$"))
def has_approvals(wallets: Wallets, count: str, required: str) -> None:
    stored = wallets.held()
    assert (len(stored.approvers), stored.required) == (int(count), int(required))
    assert stored.status == "pending"


@then(parsers.re(r"that transfer has (?P<count>\d+) approvals? of (?P<required>\d+)$"))
def own_has_approvals(wallets: Wallets, count: str, required: str) -> None:
    assert wallets.own is not None
    assert (len(wallets.own.approvers), wallets.own.required) == (int(count), int(required))
    assert "Alice" not in wallets.own.approvers


@then(parsers.re(r'(?:her|his) approval is refused, because "(?P<why>[^"]+)"$'))
def approval_refused(wallets: Wallets, why: str) -> None:
    assert wallets.approval_error is not None, "the approval was taken"
    assert wallets.approval_error.status == 400, wallets.approval_error
    assert why in wallets.approval_error.message, wallets.approval_error.message


@when("the service ends the approvals that ran out of time")
def expiry_job(wallets: Wallets) -> None:
    assert wallets.run(wallets.container.jobs().expire_approvals()) == 1


@then("the transfer's approval has expired")
def approval_expired(wallets: Wallets) -> None:
    stored = wallets.held()
    assert (stored.status, stored.reason) == ("expired", "expired")


def _send_events(wallets: Wallets) -> list[str]:
    page = wallets.run(wallets.container.event_feed().read(wallets.caller(), limit=1000))
    return [e.type for e in page.events if e.type.startswith("send.")]


@then("the feed shows the transfer held, approved, then on its way")
def feed(wallets: Wallets) -> None:
    types = _send_events(wallets)
    assert types == ["send.awaiting_approval", "send.approved", "send.pending"], types


@then("the feed shows the transfer held, then rejected")
def feed_rejected(wallets: Wallets) -> None:
    types = _send_events(wallets)
    assert types == ["send.awaiting_approval", "send.rejected"], types


@then("the audit log records the decisions:")
def decisions(wallets: Wallets, datatable: list[list[str]]) -> None:
    header, *rows = datatable
    assert header == ["decision", "rule"], header
    expected = [(decision, RULE_WORDS.get(rule, rule)) for decision, rule in rows]
    entries = wallets.audit("policy.decide")
    assert [(DECIDED[e.outcome], e.target) for e in entries] == expected


@then(parsers.parse('the audit log records the refused send with the message naming "{rule}"'))
def refused_send_audited(wallets: Wallets, rule: str) -> None:
    refusals = [e for e in wallets.audit("wallet.send") if e.outcome == "403"]
    assert len(refusals) == 1, refusals
    assert refusals[0].detail is not None
    assert refusals[0].detail.startswith(f"Transfer refused by withdrawal policy rule {rule}:")


@then(
    parsers.parse("the api client's policy shows the change pending, in force {duration} from now")
)
def change_pending(wallets: Wallets, duration: str) -> None:
    overview = wallets.run(wallets.policies.overview(wallets.client_id))
    assert overview.in_force is not None and overview.in_force.version == 1
    (pending,) = overview.pending
    now = wallets.clock.now()
    assert pending.effective_at == now + timedelta(seconds=seconds_of(duration))
    assert [r.name for r in pending.policy.rules] == ["anything-goes"]


@then("the api client's policy shows no pending change")
def nothing_pending(wallets: Wallets) -> None:
    overview = wallets.run(wallets.policies.overview(wallets.client_id))
    assert overview.pending == ()
    assert overview.in_force is not None
    assert [r.name for r in overview.in_force.policy.rules] == ["no-eth"]


@then(
    "the audit log records the policy set, changed and the change cancelled, each by the operator"
)
def changes_audited(wallets: Wallets) -> None:
    sets, cancels = wallets.audit("policy.set"), wallets.audit("policy.cancel")
    assert len(sets) == 2 and len(cancels) == 1
    assert all((e.detail or "").startswith(f"set by {OPERATOR};") for e in sets)
    assert (cancels[0].target, cancels[0].detail) == ("version 2", f"cancelled by {OPERATOR}")
