@deposits @events
Feature: Deposits on chain, and the event feed an integrator reads
  Coins and tokens that reach a user's wallet (or the api client's platform wallet) are
  found on the chain whoever sent them: another wallet, an exchange, a contract. The
  integrator learns of them, and of every send and trade, from one feed of events in
  order. It keeps the id of the last event it handled and reads on from there: it never
  misses an event and never sees one twice.

  A deposit is "seen" as soon as the chain shows it, and "confirmed" once it is as deep in
  the chain as the service requires for its own transfers. Credit the user on
  "confirmed", never on "seen": a reorganisation of the chain can still take a seen
  deposit away, and then the feed says it was "reversed".

  Background:
    Given an api client with a user whose wallet has an ETH address
    And the chain needs 3 blocks for a deposit to be confirmed

  Rule: A deposit is reported when seen, and again when confirmed

    Scenario: Someone pays the user in ETH
      When 0.5 ETH is sent to the user's address
      Then the feed shows a deposit of 0.5 ETH seen for the user
      When the payment is 3 blocks deep
      Then the feed shows the deposit of 0.5 ETH confirmed for the user
      And the user's deposits list it as confirmed

    Scenario: An exchange pays the user in USDT
      When 25 USDT are sent to the user's address by an exchange
      And the payment is 3 blocks deep
      Then the feed shows a deposit of 25 USDT seen for the user
      And the feed shows the deposit of 25 USDT confirmed for the user

    Scenario: A payment to the platform wallet is the api client's own
      Given the api client has a platform wallet
      When 2 ETH are sent to the platform wallet and are 3 blocks deep
      Then the feed shows the deposit of 2 ETH confirmed for the platform wallet

  Rule: A deposit the chain takes back is reversed, never confirmed

    Scenario: A reorganisation drops the payment before it is deep enough
      When 0.5 ETH is sent to the user's address
      And the payment is 1 block deep
      And a reorganisation replaces that block and the payment is gone for good
      Then the feed shows the deposit of 0.5 ETH reversed for the user
      And the feed never shows it confirmed

  Rule: Every deposit is found once, however long the service was away

    Scenario: Deposits made while the service was down
      Given the service stops watching the chain
      When 12 payments of 0.01 ETH reach the user's address over 30 blocks
      And the service watches the chain again
      Then the feed shows 12 deposits seen and 12 confirmed, each once

  Rule: A reader that keeps its cursor gets every event exactly once

    Scenario: The integrator's reader stops and starts again many times
      When 8 payments of 0.01 ETH reach the user's address and are 3 blocks deep
      And the reader reads 3 events at a time, stopping after each page and starting again from its stored cursor
      Then the reader has handled exactly the 16 events of the feed, in order, each once

    Scenario: A cursor older than what the feed keeps
      Given the feed keeps events for 30 days
      When 0.5 ETH is sent to the user's address
      And the reader stores the cursor of the first event
      And 31 days pass and old events are deleted
      Then reading from that cursor is refused with 410 "Cursor expired: the events after it are no longer kept; read the feed from its start (no after) and reconcile"

  Rule: Trades and sends are on the same feed

    Scenario: A buy is reported approved, then completed
      When the user buys 100 EUR of ETH and approves the trade
      Then the feed shows the trade approved, then completed, with its amounts
