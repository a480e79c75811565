@settlement
Feature: Trades that move coins
  A trade is priced and executed at the venue, which settles the money. The coins move on
  the chain, between the user's wallet and the desk: the api client's platform wallet,
  which holds the operator's inventory.

  A buy that completes is delivered: the desk sends the bought coins to the user's wallet
  and pays the network fee, so the user receives exactly what was bought. A sell's coins
  are reserved when it is approved: from then on they can be neither sold again nor sent
  away. Once the sell completes they are collected: moved from the user's wallet to the
  desk. Moving them needs the wallet password, which the service never keeps, so it is
  given with the approval or later to "collect" the trade.

  Every trade that was approved shows where its coins are ("settlement"), and every move
  is an event on the feed. Each trade's coins move once, whoever asks how many times.

  In these scenarios the venue executes at once, except for the amounts it is told to
  reject (a sell or buy worth exactly 502 USD). The network fee of an ETH transfer is
  0.00042 ETH.

  Background:
    Given an api client enabled for ETH
    And a user whose wallet was created with the password "correct horse battery"
    And the operator has provisioned the api client's platform wallet as the desk

  Rule: A buy is delivered from the desk

    Scenario: A completed buy is delivered to the user's wallet
      Given the desk holds 5 ETH
      When the user buys 0.3 ETH and approves the trade
      Then the trade is completed
      And its coins are "sent": 0.3 ETH on their way
      When the transfer is confirmed on the chain and the service's jobs have run
      Then its coins are "settled"
      And the user's wallet holds 0.3 ETH
      And the desk holds 4.69958 ETH

    Scenario: A desk short of coins delivers once it is topped up
      Given the desk holds 0.1 ETH
      When the user buys 0.3 ETH and approves the trade
      Then the trade is completed
      And its coins are "short", because the desk does not hold enough
      When the service's jobs run
      Then its coins are still "short"
      When the operator tops the desk up with 1 ETH
      And the service's jobs run three times
      Then its coins are "sent": 0.3 ETH on their way
      And exactly one transfer has left the desk

  Rule: A sell's coins are reserved at its approval and collected to the desk

    Background:
      Given the user's wallet holds 1 ETH

    Scenario: A sell approved with the password is collected at once
      When the user sells 0.5 ETH and approves the trade with the password "correct horse battery"
      Then the trade is completed
      And its coins are "sent": 0.5 ETH on their way
      When the transfer is confirmed on the chain and the service's jobs have run
      Then its coins are "settled"
      And the desk holds 0.5 ETH
      And the user's wallet holds 0.49958 ETH
      And nothing of the user's wallet is reserved

    Scenario: A sell approved without the password waits for it
      When the user sells 0.5 ETH and approves the trade
      Then the trade is completed
      And its coins are "awaiting_password", with the reason "The collection needs the wallet password: POST /trade/collect"
      And 0.50042 ETH of the user's wallet are reserved
      When the user collects the trade with the password "not the password"
      Then the request fails with status 401 and the message "Invalid credentials"
      And its coins are still "awaiting_password"
      And no coins have left the user's wallet
      When the user collects the trade with the password "correct horse battery"
      Then its coins are "sent": 0.5 ETH on their way
      When the user collects the trade with the password "correct horse battery"
      Then its coins are "sent": 0.5 ETH on their way
      And exactly one transfer has left the user's wallet

    Scenario: Coins already sold cannot be sold again
      Given the user has sold 0.7 ETH without giving the password
      When the user sells 0.5 ETH and approves the trade
      Then the request fails with status 400 and the message "The wallet holds 1 ETH, of which 0.29958 ETH are free (0.70042 ETH reserved for sells being settled or spent by sends in flight), less than the 0.5 ETH to sell"
      When the user sells 0.2 ETH and approves the trade
      Then the trade is completed

    Scenario: Reserved coins cannot be sent away
      Given the user has sold 0.7 ETH without giving the password
      When the user sends 0.5 ETH to someone else
      Then the request fails with status 400 and a message naming "0.70042 ETH are reserved for sells being settled"
      And no coins have left the user's wallet
      When the user sends 0.2 ETH to someone else
      Then the request succeeds

    Scenario: A sell the venue rejects releases its coins
      When the user sells ETH worth 502 USD and approves the trade with the password "correct horse battery"
      Then the request fails with status 502
      And its coins are "released"
      And nothing of the user's wallet is reserved
      And no coins have left the user's wallet
      When the user collects the trade with the password "correct horse battery"
      Then the request fails with status 409 and the message "Nothing to collect: the sell did not complete"

  Rule: Every move of the coins is on the feed

    Scenario: The feed follows a sell's coins to the desk
      Given the user's wallet holds 1 ETH
      When the user sells 0.5 ETH and approves the trade
      And the user collects the trade with the password "correct horse battery"
      And the transfer is confirmed on the chain and the service's jobs have run
      Then the feed shows the trade's coins reserved, awaiting_password, sent and settled, in that order
      And every one of those events names the trade, the sell, ETH and 0.5

    Scenario: The feed follows a buy that could not be delivered at first
      Given the desk holds 0.1 ETH
      When the user buys 0.3 ETH and approves the trade
      And the operator tops the desk up with 1 ETH
      And the service's jobs run three times
      And the transfer is confirmed on the chain and the service's jobs have run
      Then the feed shows the trade's coins reserved, short, sent and settled, in that order
