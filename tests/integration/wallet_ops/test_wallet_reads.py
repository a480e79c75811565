"""Balance, info, history, lookup and fee quotes, for users and for the platform wallet."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from ops_support import ELSEWHERE, Ops, make_ops

from walletcore.clock import ManualClock
from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.errors import (
    AddressUnknown,
    AssetNotEnabled,
    AssetUnavailableOnEndpoint,
    DomainError,
    HistoryUnavailable,
    InvalidRequest,
    PlatformWalletNotFound,
    TransactionNotFound,
    UnknownAsset,
    UserNotFound,
)
from walletcore.domain.ids import new_id
from walletcore.domain.wallet import TxRow
from walletcore.ports import FeeQuote
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.descriptions import DESCRIPTIONS
from walletcore_litestar.wallet_ops_schemas import TransactionRow, fee_result

DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def tx_row_view(row: TxRow, asset: Asset) -> Any:
    """A transaction row as the HTTP API answers it."""
    native = CONTRACT_CATALOG.native_asset(asset.chain)
    return msgspec.to_builtins(TransactionRow.of(row, asset, native))


def fee_view(quote: FeeQuote, asset: Asset) -> Any:
    """A fee quote as the HTTP API answers it."""
    native = CONTRACT_CATALOG.native_asset(asset.chain)
    fee_wire = DESCRIPTIONS[asset.chain].fee_wire
    return msgspec.to_builtins(fee_result(quote, asset, native, fee_wire))


async def test_history_is_newest_first_and_confirms_after_the_delay(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    receipt = await ops.send(client, user, 2, "0.25")
    caller = ops.caller(client)
    page = await ops.reads.transactions(caller, asset_id=2, user_id=user)
    rows = [tx_row_view(r, page.asset) for r in page.rows]
    assert [(r["type"], r["status"]) for r in rows] == [("send", "pending"), ("receive", "success")]
    assert rows[0] == {
        "hash": receipt.tx_hash,
        "type": "send",
        "amount": "0.24958",
        "fee": "0.00042",
        "status": "pending",
        "date": None,
    }
    assert DATETIME.match(rows[1]["date"])
    found = await ops.reads.txid(caller, asset_id=2, user_id=user, tx_hash=receipt.tx_hash)
    assert found.row.status == "pending"
    ops.clock.advance(3)  # WALLETCORE_SANDBOX_CONFIRM_SECONDS, default 3
    found = await ops.reads.txid(caller, asset_id=2, user_id=user, tx_hash=receipt.tx_hash.upper())
    view = tx_row_view(found.row, found.asset)
    assert view["status"] == "success" and DATETIME.match(view["date"])


async def test_info_shows_address_balance_and_recent_history(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    address = ops.wallets[user][Chain.TRON]
    await ops.fund(address, 41, "12.5")
    info = await ops.reads.info(ops.caller(client), asset_id=41, user_id=user)
    assert info.address == address and info.units == 12_500_000
    assert [r.type for r in info.transactions] == ["receive"]


async def test_info_answers_an_empty_history_when_it_cannot_be_read(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)

    async def unavailable(address: str, asset: Asset, limit: int) -> list[TxRow]:
        raise HistoryUnavailable()

    ops.gateways[Chain.ETHEREUM].inner.history = unavailable  # type: ignore[method-assign]
    info = await ops.reads.info(ops.caller(client), asset_id=2, user_id=user)
    assert info.transactions == [] and info.units == 0
    with pytest.raises(HistoryUnavailable) as caught:
        await ops.reads.transactions(ops.caller(client), asset_id=2, user_id=user)
    assert caught.value.status == 503


@pytest.mark.parametrize(("page_size", "expected"), [(None, 10), (3, 3)])
async def test_history_pages_follow_the_setting(
    settings: Settings, clock: ManualClock, page_size: int | None, expected: int
) -> None:
    ops = make_ops(
        settings, clock, **({} if page_size is None else {"transactions_page_size": page_size})
    )
    client = await ops.client(platform=True)
    user = await ops.user(client)
    platform = await ops.platform_address(client, Chain.SOLANA)
    for _ in range(12):
        await ops.fund(ops.wallets[user][Chain.SOLANA], 6, "1")
        await ops.fund(platform, 6, "1")
    for platform_side in (False, True):
        page = await ops.reads.transactions(
            ops.caller(client),
            asset_id=6,
            user_id=None if platform_side else user,
            platform=platform_side,
        )
        assert len(page.rows) == expected


async def test_bitcoin_balance_of_an_address_without_transactions_is_404(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    with pytest.raises(AddressUnknown) as caught:
        await ops.reads.balance(ops.caller(client), asset_id=1, user_id=user)
    assert caught.value.status == 404
    info = await ops.reads.info(ops.caller(client), asset_id=1, user_id=user)
    assert info.units == 0 and info.transactions == []
    assert await ops.balance(client, user, 2) == "0"  # other chains answer 0


async def test_an_unknown_transaction_is_404(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    with pytest.raises(TransactionNotFound):
        await ops.reads.txid(ops.caller(client), asset_id=4, user_id=user, tx_hash="ab" * 32)
    with pytest.raises(InvalidRequest, match="txHash is required"):
        await ops.reads.txid(ops.caller(client), asset_id=4, user_id=user, tx_hash=None)


async def test_another_wallets_transaction_is_404(ops: Ops) -> None:
    client = await ops.client()
    user, other = await ops.user(client), await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    receipt = await ops.send(client, user, 2, "0.1")
    with pytest.raises(TransactionNotFound):
        await ops.reads.txid(ops.caller(client), asset_id=2, user_id=other, tx_hash=receipt.tx_hash)
    with pytest.raises(TransactionNotFound):  # the right wallet, another asset
        await ops.reads.txid(ops.caller(client), asset_id=21, user_id=user, tx_hash=receipt.tx_hash)


@pytest.mark.parametrize(
    ("asset_id", "fee"),
    [
        (1, "0.0000141"),
        (2, "0.00042"),
        (21, "0.0013"),
        (3, "0.000063"),
        (5, "0.00063"),
        (4, {"bandwidth": 268}),
        (41, {"bandwidth": 345, "energy": 130000}),
        (6, "0.000005"),
        (62, "0.00204428"),
    ],
)
async def test_fee_quotes_follow_each_chains_model(
    ops: Ops, asset_id: int, fee: str | dict[str, int]
) -> None:
    client = await ops.client()
    user = await ops.user(client)
    from walletcore.testing import CONTRACT_CATALOG

    chain = CONTRACT_CATALOG.asset_by_id(asset_id).chain
    answer = await ops.reads.fee(
        ops.caller(client), asset_id=asset_id, user_id=user, recipient=ELSEWHERE[chain]
    )
    assert fee_view(answer.quote, answer.asset) == fee


async def test_a_token_holder_is_cheaper_to_pay_on_tron_and_solana(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ELSEWHERE[Chain.TRON], 41, "1")
    await ops.fund(ELSEWHERE[Chain.SOLANA], 62, "1")
    tron = await ops.reads.fee(
        ops.caller(client), asset_id=41, user_id=user, recipient=ELSEWHERE[Chain.TRON]
    )
    sol = await ops.reads.fee(
        ops.caller(client), asset_id=62, user_id=user, recipient=ELSEWHERE[Chain.SOLANA]
    )
    assert fee_view(tron.quote, tron.asset) == {"bandwidth": 345, "energy": 65000}
    assert fee_view(sol.quote, sol.asset) == "0.000005"


async def test_a_user_fee_quote_follows_the_fee_payer_rule(ops: Ops) -> None:
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    user = await ops.user(client)
    caller, to = ops.caller(client), ELSEWHERE[Chain.SOLANA]
    alone = await ops.reads.fee(caller, asset_id=6, user_id=user, recipient=to, amount="0.1")
    assert fee_view(alone.quote, alone.asset) == "0.000005"  # the platform cannot pay: USER
    await ops.fund(await ops.platform_address(client, Chain.SOLANA), 6, "1")
    covered = await ops.reads.fee(caller, asset_id=6, user_id=user, recipient=to, amount="0.1")
    assert fee_view(covered.quote, covered.asset) == "0.00001"  # sponsor signs too


@pytest.mark.parametrize("recipient", ["0x1234", "0x52908400098527886e0F7030069857D2E4169EE7", 42])
async def test_a_fee_recipient_is_checked_per_chain(ops: Ops, recipient: object) -> None:
    client = await ops.client()
    user = await ops.user(client)
    with pytest.raises(InvalidRequest, match="ETHEREUM address"):
        await ops.reads.fee(ops.caller(client), asset_id=2, user_id=user, recipient=recipient)


async def test_user_reads_refuse_unknown_users_and_assets(ops: Ops) -> None:
    client = await ops.client(assets=[1, 2])
    user = await ops.user(client)
    caller = ops.caller(client)
    with pytest.raises(UserNotFound):
        await ops.reads.balance(caller, asset_id=2, user_id=new_id())
    with pytest.raises(AssetNotEnabled):
        await ops.reads.balance(caller, asset_id=21, user_id=user)
    with pytest.raises(UnknownAsset):
        await ops.reads.balance(caller, asset_id=7, user_id=user)
    with pytest.raises(InvalidRequest, match="userId"):
        await ops.reads.balance(caller, asset_id=2, user_id="nope")


# -- the platform wallet --------------------------------------------------------------------
PLATFORM_CALLS = {
    "balance": {},
    "info": {},
    "transactions": {},
    "txid": {"tx_hash": "ab" * 32},
    "fee": {"recipient": ELSEWHERE[Chain.ETHEREUM]},
}


@pytest.mark.parametrize("name", PLATFORM_CALLS)
async def test_platform_reads_are_404_until_provisioned(ops: Ops, name: str) -> None:
    client = await ops.client()
    with pytest.raises(PlatformWalletNotFound) as caught:
        await getattr(ops.reads, name)(
            ops.caller(client), asset_id=2, platform=True, **PLATFORM_CALLS[name]
        )
    assert caught.value.status == 404


@pytest.mark.parametrize("asset_id", [42, 51, 61])
@pytest.mark.parametrize("name", PLATFORM_CALLS)
async def test_flagged_assets_are_503_on_platform_endpoints(
    ops: Ops, name: str, asset_id: int
) -> None:
    client = await ops.client(platform=True)
    with pytest.raises(AssetUnavailableOnEndpoint) as caught:
        await getattr(ops.reads, name)(
            ops.caller(client), asset_id=asset_id, platform=True, **PLATFORM_CALLS[name]
        )
    assert caught.value.status == 503
    assert caught.value.message.endswith(
        f"is not available on /platform/{name}; contact the operator"
    )


async def test_a_platform_fee_to_its_own_address_is_400(ops: Ops) -> None:
    client = await ops.client(platform=True)
    own = await ops.platform_address(client, Chain.TRON)
    with pytest.raises(InvalidRequest) as caught:
        await ops.reads.fee(ops.caller(client), asset_id=4, recipient=own, platform=True)
    assert caught.value.message == "recipient must differ from the platform wallet's own address"
    quote = await ops.reads.fee(
        ops.caller(client), asset_id=4, recipient=ELSEWHERE[Chain.TRON], platform=True
    )
    assert fee_view(quote.quote, quote.asset) == {"bandwidth": 268}


async def test_platform_balance_and_info(ops: Ops) -> None:
    client = await ops.client(platform=True)
    own = await ops.platform_address(client, Chain.POLYGON)
    await ops.fund(own, 52, "3.5")
    assert await ops.balance(client, None, 52) == "3.5"
    info = await ops.reads.info(ops.caller(client), asset_id=52, platform=True)
    assert (info.address, info.units, len(info.transactions)) == (own, 3_500_000, 1)


async def test_platform_send_rules(ops: Ops) -> None:
    client = await ops.client()
    caller = ops.caller(client, "p-1")
    body = {"asset_id": 2, "recipient": ELSEWHERE[Chain.ETHEREUM], "amount": "0.1"}
    with pytest.raises(PlatformWalletNotFound):
        await ops.sends.platform_send(caller, request_id="p-1", **body)
    await ops.container.wallets().provision_platform(client.client_id)
    own = await ops.platform_address(client, Chain.ETHEREUM)
    with pytest.raises(InvalidRequest, match="platform wallet's own address"):
        await ops.sends.platform_send(caller, request_id="p-2", **{**body, "recipient": own})
    for flagged in (42, 51, 61):
        with pytest.raises(DomainError) as caught:
            await ops.sends.platform_send(
                caller,
                request_id=f"p-{flagged}",
                asset_id=flagged,
                recipient=_on(flagged),
                amount="1",
            )
        assert caught.value.status == 503
    assert ops.broadcasts() == 0


def _on(asset_id: int) -> str:
    from walletcore.testing import CONTRACT_CATALOG

    return ELSEWHERE[CONTRACT_CATALOG.asset_by_id(asset_id).chain]
