"""`AsyncClient`: the walletcore API over `httpx.AsyncClient`, one method per operation.

Every rule (tokens, retries, errors, decoding) is decided in `_core`; this module only
sends and sleeps. `_sync.py` is generated from this file by
`tests/client/generate_sync.py`; edit this one and run the script.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from decimal import Decimal
from types import TracebackType
from typing import Any, Self, cast

import httpx

from . import _core, errors, models
from ._core import Answer, Polling, RetryPolicy

#: the default time limits of one HTTP exchange (seconds)
DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)

Amount = Decimal | str | int


class AsyncClient:
    """The walletcore API for one api client (client id and api key).

    - A token is obtained on first use, cached until `refresh_early` seconds before its
      `expiresAt`, and obtained once for any number of concurrent calls.
    - `401 Missing or expired token`: one new token, the call replayed once; a second 401
      is raised. `Invalid credentials` / `Invalid password` are never retried.
    - Retries (back-off with jitter, within `retry.attempts` and `retry.deadline`) only
      where the contract makes them harmless; `approve` is never sent twice.
    - `send` and `platform_send` carry an `X-Request-Id` (a new uuid4 unless given), the
      same one on every retry, returned with the result.

    `http_client` replaces the client's own `httpx.AsyncClient` (its `base_url` must be the
    service's; it is not closed by `aclose`).
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        api_key: str,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        polling: Polling | None = None,
        refresh_early: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client_id = client_id
        self._api_key = api_key
        self.retry = retry or RetryPolicy()
        self.polling = polling or Polling()
        self.refresh_early = refresh_early
        self._own_http = http_client is None
        self._http = http_client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        self._token: models.Token | None = None
        self._auth_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, client_id={self.client_id!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections (not an `http_client` given to the constructor)."""
        if self._own_http:
            await self._http.aclose()

    # -- the one exchange ---------------------------------------------------------------------
    async def _call(
        self,
        path: str,
        payload: dict[str, Any] | None = None,
        request_id: str | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> Answer:
        op = _core.OPERATIONS[path]
        if op.needs_request_id and request_id is None:
            request_id = _core.new_request_id()
        content = _core.encode(payload)
        started = time.monotonic()
        retries = 0
        replayed = False
        while True:
            token = None if op.anonymous else await self._bearer()
            sent = _core.headers(op, token, request_id, content is not None) | (extra_headers or {})
            try:
                response = await self._http.post(op.path, content=content, headers=sent)
            except httpx.TransportError as exc:
                error: errors.WalletcoreError = _core.transport_error(op, exc, request_id)
                pause = self.retry.next_delay(retries, time.monotonic() - started)
                if not _core.should_retry(op, error) or pause is None:
                    raise error from exc
            else:
                outcome = _core.read_answer(op, response.status_code, response.content, request_id)
                if isinstance(outcome, Answer):
                    return outcome
                error = outcome
                if isinstance(error, errors.TokenExpired) and token is not None and not replayed:
                    replayed = True  # one new token, one replay; a second 401 is raised
                    self._forget(token)
                    continue
                pause = self.retry.next_delay(retries, time.monotonic() - started)
                if not _core.should_retry(op, error) or pause is None:
                    raise error
            retries += 1
            await asyncio.sleep(pause)

    async def _bearer(self) -> str:
        token = self._token
        if token is not None and _core.token_fresh(token, self.refresh_early):
            return token.token
        async with self._auth_lock:
            token = self._token
            if token is None or not _core.token_fresh(token, self.refresh_early):
                token = await self.auth()
            return token.token

    def _forget(self, token: str) -> None:
        """Drop the cached token that was refused (not a newer one another call obtained)."""
        if self._token is not None and self._token.token == token:
            self._token = None

    # -- authentication, prices, configuration ------------------------------------------------
    async def auth(self) -> models.Token:
        """`POST /auth`: a new token, cached for the calls that follow (retried on a failed
        connect only, like every operation of `_call`)."""
        credentials = {"x-client-id": self.client_id, "x-api-key": self._api_key}
        answer = await self._call("/auth", extra_headers=credentials)
        token = cast(models.Token, _core.decode_result(models.Token, answer))
        self._token = token
        return token

    async def prices(self) -> dict[str, models.FiatPrices]:
        """`POST /prices`: indicative prices per coin symbol."""
        answer = await self._call("/prices")
        return cast(
            dict[str, models.FiatPrices],
            _core.decode_result(dict[str, models.FiatPrices], answer),
        )

    async def config(self) -> models.ClientConfig:
        """`POST /config`: the assets the api client may use and who pays network fees."""
        answer = await self._call("/config")
        return cast(models.ClientConfig, _core.decode_result(models.ClientConfig, answer))

    # -- trades -------------------------------------------------------------------------------
    async def _trade_call(self, path: str, payload: dict[str, Any]) -> models.Trade:
        answer = await self._call(path, payload)
        return cast(models.Trade, _core.decode_result(models.Trade, answer))

    async def sell(
        self,
        user_id: str,
        asset_id: int,
        *,
        crypto_amount: Amount | None = None,
        fiat_amount: Amount | None = None,
        fiat: str | None = None,
    ) -> models.Trade:
        """`POST /sell`: an open sell quote (nothing is sold until `approve`)."""
        return await self._trade_call(
            "/sell", _core.quote_body(user_id, asset_id, crypto_amount, fiat_amount, fiat)
        )

    async def order(
        self,
        user_id: str,
        asset_id: int,
        *,
        crypto_amount: Amount | None = None,
        fiat_amount: Amount | None = None,
        fiat: str | None = None,
    ) -> models.Trade:
        """`POST /order`: an open buy quote (nothing is bought until `approve`)."""
        return await self._trade_call(
            "/order", _core.quote_body(user_id, asset_id, crypto_amount, fiat_amount, fiat)
        )

    async def approve(
        self, user_id: str, trade_id: str, *, password: str | None = None
    ) -> models.Trade:
        """`POST /trade/approve`, sent once and never again by the client.

        A `GatewayTimeout` (504), a `BadGateway` (502) or a `TransportError` leaves the trade
        to be polled with `wait_for_trade`: approving it again could trade twice.
        """
        payload = _core.body(userId=user_id, tradeId=trade_id, password=password)
        return await self._trade_call("/trade/approve", payload)

    async def collect(self, user_id: str, trade_id: str, password: str) -> models.Trade:
        """`POST /trade/collect`: move a completed sell's coins to the desk."""
        payload = _core.body(userId=user_id, tradeId=trade_id, password=password)
        return await self._trade_call("/trade/collect", payload)

    async def cancel(self, user_id: str, trade_id: str) -> models.Trade:
        """`POST /trade/cancel`: cancel an open quote (a cancelled one is answered unchanged)."""
        return await self._trade_call("/trade/cancel", _core.body(userId=user_id, tradeId=trade_id))

    async def trade(self, user_id: str, trade_id: str) -> models.Trade:
        """`POST /trade`: one trade of the user."""
        return await self._trade_call("/trade", _core.body(userId=user_id, tradeId=trade_id))

    async def trades(
        self, user_id: str, *, side: str | None = None, status: str | None = None
    ) -> tuple[models.Trade, ...]:
        """`POST /trades`: the user's trades, newest first, one page."""
        answer = await self._call("/trades", _core.body(userId=user_id, side=side, status=status))
        return cast(tuple[models.Trade, ...], _core.decode_result(tuple[models.Trade, ...], answer))

    # -- wallets ------------------------------------------------------------------------------
    async def create(self, password: str) -> models.CreatedWallet:
        """`POST /create`: a new user and wallet; the mnemonic is shown this once."""
        answer = await self._call("/create", _core.body(password=password))
        return cast(models.CreatedWallet, _core.decode_result(models.CreatedWallet, answer))

    async def extend(self, user_id: str, password: str) -> models.WalletAddresses:
        """`POST /extend`: addresses on the chains added since the wallet was created."""
        answer = await self._call("/extend", _core.body(userId=user_id, password=password))
        return cast(models.WalletAddresses, _core.decode_result(models.WalletAddresses, answer))

    async def addresses(self, user_id: str) -> models.WalletAddresses:
        """`POST /addresses`: the user's address per chain."""
        answer = await self._call("/addresses", _core.body(userId=user_id))
        return cast(models.WalletAddresses, _core.decode_result(models.WalletAddresses, answer))

    async def balance(self, user_id: str, asset_id: int) -> Decimal:
        """`POST /balance`: the user's balance of the asset."""
        answer = await self._call("/balance", _core.body(userId=user_id, assetId=asset_id))
        return cast(Decimal, _core.decode_result(Decimal, answer))

    async def info(self, user_id: str, asset_id: int) -> models.WalletInfo:
        """`POST /info`: address, balance and recent transactions."""
        answer = await self._call("/info", _core.body(userId=user_id, assetId=asset_id))
        return cast(models.WalletInfo, _core.decode_result(models.WalletInfo, answer))

    async def transactions(self, user_id: str, asset_id: int) -> tuple[models.Transaction, ...]:
        """`POST /transactions`: recent transactions, newest first."""
        answer = await self._call("/transactions", _core.body(userId=user_id, assetId=asset_id))
        return cast(
            tuple[models.Transaction, ...],
            _core.decode_result(tuple[models.Transaction, ...], answer),
        )

    async def txid(self, user_id: str, asset_id: int, tx_hash: str) -> models.Transaction:
        """`POST /txid`: one transaction of the user's wallet."""
        payload = _core.body(userId=user_id, assetId=asset_id, txHash=tx_hash)
        answer = await self._call("/txid", payload)
        return cast(models.Transaction, _core.decode_result(models.Transaction, answer))

    async def fee(
        self, user_id: str, asset_id: int, recipient: str, amount: Amount | None = None
    ) -> Decimal | models.TronFee:
        """`POST /fee`: the network fee of a send (TRON: bandwidth and energy)."""
        payload = _core.body(
            userId=user_id,
            assetId=asset_id,
            recipient=recipient,
            amount=None if amount is None else _core.amount_text(amount),
        )
        return _core.fee_of(await self._call("/fee", payload))

    async def send(
        self,
        user_id: str,
        asset_id: int,
        recipient: str,
        amount: Amount,
        password: str,
        *,
        request_id: str | None = None,
    ) -> models.SendResult | models.HeldSend:
        """`POST /send`: a transfer from the user's wallet.

        `request_id` is the idempotency key: a new uuid4 unless given, the same on every
        retry, returned as `result.request_id`. After an error with `retry_safe`, send again
        with that id (never a new one). A `HeldSend` (202) waits for operators' approval.
        """
        request_id = request_id or _core.new_request_id()
        payload = _core.body(
            userId=user_id,
            assetId=asset_id,
            recipient=recipient,
            amount=_core.amount_text(amount),
            password=password,
        )
        answer = await self._call("/send", payload, request_id)
        return _core.send_outcome(answer, request_id)

    # -- events, deposits, webhooks, policies -------------------------------------------------
    async def events(
        self, after: str | None = None, *, limit: int | None = None, user_id: str | None = None
    ) -> models.EventPage:
        """`POST /events`: one page of the feed after the cursor `after`."""
        answer = await self._call("/events", _core.body(after=after, limit=limit, userId=user_id))
        return cast(models.EventPage, _core.decode_result(models.EventPage, answer))

    async def deposits(
        self, user_id: str | None = None, *, limit: int | None = None
    ) -> tuple[models.Deposit, ...]:
        """`POST /deposits`: deposits, newest first (all users' without `user_id`)."""
        answer = await self._call("/deposits", _core.body(userId=user_id, limit=limit))
        return cast(
            tuple[models.Deposit, ...], _core.decode_result(tuple[models.Deposit, ...], answer)
        )

    async def webhook_deliveries(
        self, *, limit: int | None = None, event_id: str | None = None
    ) -> tuple[models.Delivery, ...]:
        """`POST /webhooks/deliveries`: the attempts to post events to the webhook."""
        payload = _core.body(limit=limit, eventId=event_id)
        answer = await self._call("/webhooks/deliveries", payload)
        return cast(
            tuple[models.Delivery, ...], _core.decode_result(tuple[models.Delivery, ...], answer)
        )

    async def policy(self) -> models.Policy:
        """`POST /policy`: the withdrawal policy in force, pending versions, the allowlist."""
        answer = await self._call("/policy")
        return cast(models.Policy, _core.decode_result(models.Policy, answer))

    async def approvals(
        self, *, status: str | None = None, limit: int | None = None
    ) -> tuple[models.Approval, ...]:
        """`POST /approvals`: the sends held for approval, newest first."""
        answer = await self._call("/approvals", _core.body(status=status, limit=limit))
        return cast(
            tuple[models.Approval, ...], _core.decode_result(tuple[models.Approval, ...], answer)
        )

    # -- the platform wallet ------------------------------------------------------------------
    async def platform_addresses(self) -> dict[str, str]:
        """`POST /platform/addresses`: the platform wallet's address per chain."""
        answer = await self._call("/platform/addresses")
        return cast(dict[str, str], _core.decode_result(dict[str, str], answer))

    async def platform_balance(self, asset_id: int) -> Decimal:
        """`POST /platform/balance`."""
        answer = await self._call("/platform/balance", _core.body(assetId=asset_id))
        return cast(Decimal, _core.decode_result(Decimal, answer))

    async def platform_info(self, asset_id: int) -> models.WalletInfo:
        """`POST /platform/info`."""
        answer = await self._call("/platform/info", _core.body(assetId=asset_id))
        return cast(models.WalletInfo, _core.decode_result(models.WalletInfo, answer))

    async def platform_transactions(self, asset_id: int) -> tuple[models.Transaction, ...]:
        """`POST /platform/transactions`."""
        answer = await self._call("/platform/transactions", _core.body(assetId=asset_id))
        return cast(
            tuple[models.Transaction, ...],
            _core.decode_result(tuple[models.Transaction, ...], answer),
        )

    async def platform_txid(self, asset_id: int, tx_hash: str) -> models.Transaction:
        """`POST /platform/txid`."""
        answer = await self._call("/platform/txid", _core.body(assetId=asset_id, txHash=tx_hash))
        return cast(models.Transaction, _core.decode_result(models.Transaction, answer))

    async def platform_fee(self, asset_id: int, recipient: str) -> Decimal | models.TronFee:
        """`POST /platform/fee`."""
        payload = _core.body(assetId=asset_id, recipient=recipient)
        return _core.fee_of(await self._call("/platform/fee", payload))

    async def platform_send(
        self, asset_id: int, recipient: str, amount: Amount, *, request_id: str | None = None
    ) -> models.SendResult | models.HeldSend:
        """`POST /platform/send`: a transfer from the platform wallet (`request_id` as in
        `send`)."""
        request_id = request_id or _core.new_request_id()
        payload = _core.body(
            assetId=asset_id, recipient=recipient, amount=_core.amount_text(amount)
        )
        answer = await self._call("/platform/send", payload, request_id)
        return _core.send_outcome(answer, request_id)

    # -- waiting ------------------------------------------------------------------------------
    async def wait_for_trade(
        self, user_id: str, trade_id: str, *, timeout: float = 120.0
    ) -> models.Trade:
        """Poll `/trade` with back-off until the trade is terminal (`completed`, `failed`,
        `expired`, `cancelled`): the one safe step after a 502/504 or a lost answer on
        `approve`. Raises `WaitTimeout` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        polls = 0
        last = "unknown"
        while True:
            try:
                trade = await self.trade(user_id, trade_id)
            except errors.WalletcoreError as exc:
                if not _core.keeps_polling(exc):
                    raise
            else:
                if trade.is_terminal:
                    return trade
                last = trade.status
            pause = self.polling.delay(polls)
            if time.monotonic() + pause > deadline:
                raise errors.WaitTimeout(
                    f"trade {trade_id} still {last} after {timeout:g} s", operation="/trade"
                )
            polls += 1
            await asyncio.sleep(pause)

    async def wait_for_transaction(
        self, user_id: str | None, asset_id: int, tx_hash: str, *, timeout: float = 120.0
    ) -> models.Transaction:
        """Poll `/txid` (`/platform/txid` when `user_id` is None) until the transaction's
        status leaves `pending`."""
        deadline = time.monotonic() + timeout
        polls = 0
        while True:
            try:
                if user_id is None:
                    row = await self.platform_txid(asset_id, tx_hash)
                else:
                    row = await self.txid(user_id, asset_id, tx_hash)
            except errors.WalletcoreError as exc:
                if not _core.keeps_polling(exc):
                    raise
            else:
                if row.status != "pending":
                    return row
            pause = self.polling.delay(polls)
            if time.monotonic() + pause > deadline:
                raise errors.WaitTimeout(
                    f"transaction {tx_hash} still pending after {timeout:g} s", operation="/txid"
                )
            polls += 1
            await asyncio.sleep(pause)

    async def wait_for_send(
        self,
        held: models.HeldSend,
        *,
        user_id: str | None,
        asset_id: int,
        recipient: str,
        amount: Amount,
        password: str | None = None,
        timeout: float = 3600.0,
    ) -> models.SendResult:
        """Send the held request again (same `X-Request-Id`, same body) with back-off until
        operators approved it and it is signed: its `SendResult`. A rejected or lapsed
        approval raises `Forbidden`. `user_id` None: a platform send."""
        deadline = time.monotonic() + timeout
        polls = 0
        while True:
            if user_id is None:
                outcome = await self.platform_send(
                    asset_id, recipient, amount, request_id=held.request_id
                )
            else:
                if password is None:
                    raise ValueError("a user's send needs the wallet password")
                outcome = await self.send(
                    user_id, asset_id, recipient, amount, password, request_id=held.request_id
                )
            if isinstance(outcome, models.SendResult):
                return outcome
            pause = self.polling.delay(polls)
            if time.monotonic() + pause > deadline:
                raise errors.WaitTimeout(
                    f"send {held.request_id} still awaiting approval after {timeout:g} s",
                    request_id=held.request_id,
                    operation="/send",
                )
            polls += 1
            await asyncio.sleep(pause)

    async def iter_events(
        self,
        after: str | None = None,
        *,
        user_id: str | None = None,
        limit: int = 100,
        stop_when_idle: bool = False,
    ) -> AsyncGenerator[models.Event, None]:
        """The feed's events after the cursor `after`, oldest first, without end: while
        nothing new comes it polls with back-off (or stops, with `stop_when_idle`). Save
        `event.id` once an event is handled, and start again from it.

        A cursor the feed no longer keeps raises `CursorExpired` (410); one it never gave,
        `UnknownCursor` (400)."""
        idle = 0
        while True:
            page = await self.events(after, limit=limit, user_id=user_id)
            for event in page.events:
                yield event
                after = event.id
            if page.hasMore:
                idle = 0
                continue
            if page.events:
                idle = 0
            if stop_when_idle:
                return
            await asyncio.sleep(self.polling.delay(idle))
            idle += 1
