@sends
Feature: Sending funds once, whatever happens on the way
  A send moves real money out of a wallet, and a transfer on a blockchain cannot be taken
  back. When the api client hears nothing back from a send (a timeout, a dropped
  connection, a server error), it cannot know whether the money left. The one safe move is
  to send the very same request again, under the same request id. The service then answers
  what the first attempt did, and the money never leaves twice.

  The request id names one transfer: the user, the asset, the recipient and the amount.
  The wallet password is not part of it, and is never stored.

  Background:
    Given an api client enabled for ETH, USDT on ETHEREUM and SOL
    And a user whose wallet was created with the password "correct horse battery"

  Rule: A send carries a request id, and the same request id never moves money twice

    Background:
      Given the wallet holds 1 ETH

    Scenario: A send without a request id is refused
      When the user sends 0.1 ETH without a request id
      Then the request fails with status 400 and the message "X-Request-Id is required on a send: it is the idempotency key"
      And no money has left the wallet

    Scenario: Sending the same request again answers the first result
      When the user sends 0.1 ETH with the request id "pay-001"
      And the user sends 0.1 ETH with the request id "pay-001" again
      Then both answers name the same transaction
      And exactly one transfer has left the wallet
      And the wallet holds 0.9 ETH

    Scenario: A request id already used for another transfer is refused
      Given the user has sent 0.1 ETH with the request id "pay-001"
      When the user sends 0.2 ETH with the request id "pay-001"
      Then the request fails with status 422 and the message "X-Request-Id was already used with a different request"
      And exactly one transfer has left the wallet

    Scenario: Many copies of one send arriving together move the money once
      When 20 copies of a send of 0.1 ETH with the request id "pay-001" arrive at once
      Then every copy either names the same transaction or is told the send is still in progress
      And exactly one transfer has left the wallet

  Rule: When the outcome of a send is unknown, sending it again completes that same transfer

    Background:
      Given the wallet holds 1 ETH

    Scenario: The network's answer is lost on the way back
      Given the network's answer to the next transfer will be lost
      When the user sends 0.1 ETH with the request id "pay-001"
      Then the request fails with status 504 and a message starting "Broadcast outcome unknown"
      When the user sends 0.1 ETH with the request id "pay-001" again
      Then the request succeeds
      And the answer names the transaction that had already been sent
      And exactly one transfer has left the wallet
      And the wallet holds 0.9 ETH

    Scenario: The network cannot be reached, then can
      Given the network cannot be reached
      When the user sends 0.1 ETH with the request id "pay-001"
      Then the request fails with status 504 and a message starting "Broadcast outcome unknown"
      And no money has left the wallet
      Given the network can be reached again
      When the user sends 0.1 ETH with the request id "pay-001" again
      Then the request succeeds
      And the answer names the transaction that had already been signed
      And exactly one transfer has left the wallet

  Rule: A send refused before anything was signed can be corrected and sent again under the same request id

    Background:
      Given the wallet holds 1 ETH

    Scenario: The right password after a wrong one
      When the user sends 0.1 ETH with the request id "pay-001" and the password "battery horse correct"
      Then the request fails with status 401 and the message "Invalid credentials"
      And no money has left the wallet
      When the user sends 0.1 ETH with the request id "pay-001" again
      Then the request succeeds
      And exactly one transfer has left the wallet

    Scenario: Funding the wallet after a refusal for lack of funds
      When the user sends 3 ETH with the request id "pay-001"
      Then the request fails with status 400 and the message "Insufficient ETH balance: the wallet holds 1 ETH, the send needs 3 ETH"
      Given the wallet receives 5 ETH
      When the user sends 3 ETH with the request id "pay-001" again
      Then the request succeeds
      And the wallet holds 3 ETH

  Rule: Who pays the network fee of a send

    Scenario: The user pays the fee of a native coin send out of the amount
      Given the wallet holds 1 ETH
      When the user sends 0.5 ETH
      Then the answer says a fee of 0.00042 ETH was paid by the USER
      And the recipient receives 0.49958 ETH
      And the wallet holds 0.5 ETH

    Scenario: A token send needs the chain's own coin in the wallet for the fee
      Given the wallet holds 100 USDT on ETHEREUM
      When the user sends 10 USDT on ETHEREUM
      Then the request fails with status 400 and the message "Not enough ETH for the network fee: the send needs 0.0013 ETH in the wallet, which holds 0 ETH"

    Scenario: The api client pays the fee from its platform wallet
      Given the api client pays the network fees of its users
      And the operator has provisioned the api client's platform wallet
      And the platform wallet holds 1 SOL
      And the wallet holds 1 SOL
      When the user sends 0.4 SOL
      Then the answer says a fee of 0.00001 SOL was paid by the PLATFORM
      And the recipient receives 0.4 SOL
      And the wallet holds 0.6 SOL

    Scenario: When the platform wallet cannot pay, the user pays, and the answer says so
      Given the api client pays the network fees of its users
      And the operator has provisioned the api client's platform wallet
      And the wallet holds 1 SOL
      When the user sends 0.4 SOL
      Then the answer says a fee of 0.000005 SOL was paid by the USER
      And the recipient receives 0.399995 SOL
