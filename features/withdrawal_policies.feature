@policies
Feature: Withdrawal policies
  A withdrawal policy decides whether a transfer out of a wallet is sent, refused or held
  until operators approve it. The decision comes before any key is unsealed. A policy is
  what stops a thief who holds a stolen api key or wallet password: they can ask for any
  transfer, but the policy decides whether it is signed.

  The operator writes one policy per api client: a list of rules, read in order. The first
  rule whose every condition holds decides. A transfer that no rule matches gets the
  policy's default, which is to refuse unless the policy says to send. A refusal names
  the rule that refused it, and nothing leaves the wallet. An api client without a policy
  is not guarded: every transfer is sent.

  A rule decides one of three things: send, refuse, or hold the transfer for a number of
  operators to approve. Its conditions name the wallet the transfer leaves (a user's
  wallet or the api client's platform wallet), and optionally the coin, the destination,
  a per-transfer limit, or a limit on the total sent over a rolling window. A limit is in
  the coin or in a currency at the current price.

  In these scenarios USDT is worth about 1 USD and ETH several thousand. "The cold wallet",
  "the exchange" and "a stranger" are addresses that no wallet here owns. The network fee
  of an ETH transfer from a user's wallet, 0.00042 ETH, comes out of the amount sent: a
  stranger sent 0.1 ETH receives 0.09958 ETH. The platform wallet pays its fees on top.
  "The operator" writes the policies and the allowlist. Alice, Bob and Carol are the
  operators who approve held transfers.

  Background:
    Given an api client enabled for ETH and USDT
    And a user whose wallet holds 1 ETH and 100 USDT

  Rule: Only allowlisted destinations receive

    Background:
      Given the api client's withdrawal policy:
        | rule                | transfers                                      | decision |
        | known-destinations  | from a user's wallet to an allowlisted address | send     |
        | unknown-destination | from a user's wallet                           | refuse   |
      And the operator allowlisted the cold wallet as "Cold storage", and its cooling-off has passed

    Scenario: An allowlisted address receives
      When the user sends 0.1 ETH to the cold wallet
      Then the transfer is sent
      And the cold wallet has received 0.09958 ETH
      And the api client's allowlist shows the cold wallet labelled "Cold storage"

    Scenario: Any other address is refused, and nothing leaves the wallet
      When the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "unknown-destination", because "the rule denies such transfers"
      And nothing has left the user's wallet
      And the user's wallet still holds 1 ETH and 100 USDT

    Scenario: An address removed from the allowlist is refused at once
      When the operator removes the cold wallet from the allowlist
      And the user sends 0.1 ETH to the cold wallet
      Then the transfer is refused by the rule "unknown-destination"
      And nothing has left the user's wallet

  Rule: A newly allowlisted address receives only after its cooling-off

    Background:
      Given the api client's withdrawal policy:
        | rule                | transfers                                      | decision |
        | known-destinations  | from a user's wallet to an allowlisted address | send     |
        | unknown-destination | from a user's wallet                           | refuse   |
      And a newly allowlisted address cools off for 1 hour

    Scenario: Refused during the cooling-off, sent after it
      When the operator allowlists the exchange as "Exchange"
      And the user sends 0.1 ETH to the exchange
      Then the transfer is refused by the rule "unknown-destination"
      When 59 minutes and 59 seconds pass
      And the user sends 0.1 ETH to the exchange
      Then the transfer is refused by the rule "unknown-destination"
      When 1 second passes
      And the user sends 0.1 ETH to the exchange
      Then the transfer is sent
      And the exchange has received 0.09958 ETH

  Rule: A per-transfer limit refuses a larger transfer

    Scenario: A limit in the coin
      Given the api client's withdrawal policy:
        | rule        | transfers                            | decision |
        | max-0.2-eth | from a user's wallet, over 0.2 ETH   | refuse   |
      And the policy's default is to send
      When the user sends 0.2 ETH to a stranger
      Then the transfer is sent
      When the user sends 0.21 ETH to a stranger
      Then the transfer is refused by the rule "max-0.2-eth", because "the transfer is over 0.2"
      When the user sends 50 USDT to a stranger
      Then the transfer is sent
      And a stranger has received 0.19958 ETH and 50 USDT

    Scenario: A limit in USD, at the current price
      Given the api client's withdrawal policy:
        | rule       | transfers                          | decision |
        | max-40-usd | from a user's wallet, over 40 USD  | refuse   |
      And the policy's default is to send
      When the user sends 39 USDT to a stranger
      Then the transfer is sent
      When the user sends 41 USDT to a stranger
      Then the transfer is refused by the rule "max-40-usd", because "the transfer is over 40 USD"
      When the user sends 0.02 ETH to a stranger
      Then the transfer is refused by the rule "max-40-usd"
      And a stranger has received 0 ETH and 39 USDT

  Rule: A velocity limit caps the total sent over a rolling window

    Scenario: Per user: a transfer leaves the window exactly one window after it was made
      Given the api client's withdrawal policy:
        | rule            | transfers                                                          | decision |
        | 0.3-eth-an-hour | from a user's wallet, taking the user's total over 0.3 ETH in 1 hour | refuse   |
      And the policy's default is to send
      When the user sends 0.1 ETH to a stranger
      And 30 minutes pass
      And the user sends 0.2 ETH to a stranger
      Then the transfer is sent
      When the user sends 0.01 ETH to a stranger
      Then the transfer is refused by the rule "0.3-eth-an-hour", because "it would take the total over 0.3"
      When 29 minutes and 59 seconds pass
      And the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "0.3-eth-an-hour"
      When 1 second passes
      And the user sends 0.1 ETH to a stranger
      Then the transfer is sent
      And a stranger has received 0.39874 ETH

    Scenario: Per user: each user has a window of their own
      Given the api client's withdrawal policy:
        | rule            | transfers                                                          | decision |
        | 0.3-eth-an-hour | from a user's wallet, taking the user's total over 0.3 ETH in 1 hour | refuse   |
      And the policy's default is to send
      And another user whose wallet holds 1 ETH
      When the user sends 0.3 ETH to a stranger
      And another user sends 0.3 ETH to a stranger
      Then the transfer is sent
      And a stranger has received 0.59916 ETH

    Scenario: Per api client: the transfers of every user count together
      Given the api client's withdrawal policy:
        | rule          | transfers                                                                        | decision |
        | 100-usd-a-day | from a user's wallet of USDT, taking the api client's total over 100 USD in 1 day | refuse   |
      And the policy's default is to send
      And another user whose wallet holds 1 ETH and 100 USDT
      When the user sends 60 USDT to a stranger
      And another user sends 45 USDT to a stranger
      Then the transfer is refused by the rule "100-usd-a-day", because "it would take the total over 100 USD per client"
      When another user sends 39 USDT to a stranger
      Then the transfer is sent
      And a stranger has received 0 ETH and 99 USDT

  Rule: Rules are read in order, and what no rule matches gets the default

    Scenario: The first rule that matches decides
      Given the api client's withdrawal policy:
        | rule         | transfers                    | decision |
        | eth-is-fine  | from a user's wallet of ETH  | send     |
        | nothing-else | from a user's wallet         | refuse   |
      When the user sends 0.1 ETH to a stranger
      Then the transfer is sent
      When the user sends 10 USDT to a stranger
      Then the transfer is refused by the rule "nothing-else"
      And the audit log records the decisions:
        | decision | rule         |
        | sent     | eth-is-fine  |
        | refused  | nothing-else |

    Scenario: The same rules in the other order refuse everything
      Given the api client's withdrawal policy:
        | rule         | transfers                    | decision |
        | nothing-else | from a user's wallet         | refuse   |
        | eth-is-fine  | from a user's wallet of ETH  | send     |
      When the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "nothing-else"
      And nothing has left the user's wallet

    Scenario: A transfer that no rule matches is refused by default
      Given the api client's withdrawal policy:
        | rule           | transfers                | decision |
        | platform-sends | from the platform wallet | send     |
      When the user sends 0.1 ETH to a stranger
      Then the transfer is refused with the message "Transfer refused by the withdrawal policy's default (deny): no rule matched the transfer"
      And nothing has left the user's wallet
      And the audit log records the decisions:
        | decision | rule        |
        | refused  | the default |

    Scenario: A policy whose default is to send sends what no rule matches
      Given the api client's withdrawal policy:
        | rule           | transfers                | decision |
        | platform-sends | from the platform wallet | send     |
      And the policy's default is to send
      When the user sends 0.1 ETH to a stranger
      Then the transfer is sent
      And the audit log records the decisions:
        | decision | rule        |
        | sent     | the default |

    Scenario: An api client without a policy is not guarded
      When the user sends 0.9 ETH to a stranger
      Then the transfer is sent
      And a stranger has received 0.89958 ETH
      And the audit log records the decisions:
        | decision | rule      |
        | sent     | no policy |

  Rule: A large transfer waits for the approval of two operators

    Background:
      Given the operators Alice, Bob and Carol
      And the api client's withdrawal policy:
        | rule          | transfers                          | decision             |
        | big-transfers | from a user's wallet, over 0.5 ETH | hold for 2 approvals |
      And the policy's default is to send
      And a held transfer waits at most 1 hour for its approvals

    Scenario: Two approvals, then the same request sends it, once
      When the user sends 0.6 ETH to the exchange
      Then the transfer waits for 2 approvals under the rule "big-transfers", with 0 so far
      And the transfer was initiated by the api client, so any of the operators may approve it
      And nothing has left the user's wallet
      When Alice approves the transfer
      And the user sends the same request again
      Then the transfer waits for 2 approvals under the rule "big-transfers", with 1 so far
      And nothing has left the user's wallet
      When Bob approves the transfer
      And the user sends the same request again
      Then the transfer is sent
      And the exchange has received 0.59958 ETH
      When the user sends the same request again
      Then the transfer is sent
      And exactly one transfer has left the user's wallet
      And the feed shows the transfer held, approved, then on its way

    Scenario: An operator's approval counts once
      When the user sends 0.6 ETH to the exchange
      And Alice approves the transfer
      And Alice approves the transfer
      Then her approval is refused, because "has approved"
      And the transfer has 1 approval of 2

    Scenario: An operator never approves a transfer they initiated
      Given a transfer held for approval that Alice initiated
      When Alice approves the transfer she initiated
      Then her approval is refused, because "An operator never approves a transfer they initiated"
      When Bob approves the transfer Alice initiated
      Then that transfer has 1 approval of 2

    Scenario: One rejection refuses the transfer for good
      When the user sends 0.6 ETH to the exchange
      And Carol rejects the transfer, because "unknown counterparty"
      And the user sends the same request again
      Then the transfer is refused by the rule "big-transfers", because "rejected by Carol: unknown counterparty"
      When Alice approves the transfer
      Then her approval is refused, because "is rejected, not pending"
      When the user sends the same request again
      Then the transfer is refused by the rule "big-transfers"
      And nothing has left the user's wallet

    Scenario: An approval that runs out of time refuses the transfer
      When the user sends 0.6 ETH to the exchange
      And Alice approves the transfer
      And 1 hour passes
      And Bob approves the transfer
      Then his approval is refused, because "is expired, not pending"
      When the user sends the same request again
      Then the transfer is refused by the rule "big-transfers", because "was expired"
      And nothing has left the user's wallet

    Scenario: A held transfer nobody acts on ends when its time runs out
      When the user sends 0.6 ETH to the exchange
      And 1 hour passes
      And the service ends the approvals that ran out of time
      Then the transfer's approval has expired
      And the feed shows the transfer held, then rejected
      And nothing has left the user's wallet

  Rule: The platform wallet has rules of its own

    Background:
      Given the api client's platform wallet holds 5 ETH

    Scenario: A user's rule does not decide a platform send
      Given the api client's withdrawal policy:
        | rule           | transfers                                | decision |
        | users-anywhere | from a user's wallet                     | send     |
        | platform-max-1 | from the platform wallet, over 1 ETH     | refuse   |
        | platform-rest  | from the platform wallet                 | send     |
      When the api client sends 1.5 ETH from the platform wallet to a stranger
      Then the transfer is refused by the rule "platform-max-1"
      And nothing has left the platform wallet
      When the api client sends 1 ETH from the platform wallet to a stranger
      Then the transfer is sent
      When the user sends 0.9 ETH to a stranger
      Then the transfer is sent
      And a stranger has received 1.89958 ETH

    Scenario: A platform send that no platform rule matches gets the default
      Given the api client's withdrawal policy:
        | rule           | transfers            | decision |
        | users-anywhere | from a user's wallet | send     |
      When the api client sends 0.1 ETH from the platform wallet to a stranger
      Then the transfer is refused with the message "Transfer refused by the withdrawal policy's default (deny): no rule matched the transfer"
      And nothing has left the platform wallet

  Rule: A change of the policy takes effect only after the delay of the policy in force
    A thief with a stolen operator credential cannot loosen the policy and drain the wallets
    in the same minute: the operators see the pending change and can cancel it.

    Background:
      Given the api client's withdrawal policy:
        | rule   | transfers                   | decision |
        | no-eth | from a user's wallet of ETH | refuse   |
      And the policy's default is to send
      And a change of the policy waits 1 hour

    Scenario: A looser policy waits for the delay
      When the operator changes the policy to:
        | rule          | transfers            | decision |
        | anything-goes | from a user's wallet | send     |
      And the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "no-eth"
      And the api client's policy shows the change pending, in force 1 hour from now
      When 59 minutes and 59 seconds pass
      And the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "no-eth"
      When 1 second passes
      And the user sends 0.1 ETH to a stranger
      Then the transfer is sent

    Scenario: The operator cancels a pending change
      When the operator changes the policy to:
        | rule          | transfers            | decision |
        | anything-goes | from a user's wallet | send     |
      And the operator cancels the pending change
      And 1 hour passes
      And the user sends 0.1 ETH to a stranger
      Then the transfer is refused by the rule "no-eth"
      And the api client's policy shows no pending change
      And the audit log records the policy set, changed and the change cancelled, each by the operator

  Rule: Every decision is in the audit log, refusals included

    Scenario: Sent, refused and held transfers are all audited
      Given the operators Alice and Bob
      And the api client's withdrawal policy:
        | rule                | transfers                                      | decision             |
        | big-transfers       | from a user's wallet, over 0.5 ETH             | hold for 2 approvals |
        | known-destinations  | from a user's wallet to an allowlisted address | send                 |
        | unknown-destination | from a user's wallet                           | refuse               |
      And the operator allowlisted the cold wallet as "Cold storage", and its cooling-off has passed
      When the user sends 0.1 ETH to the cold wallet
      And the user sends 0.1 ETH to a stranger
      And the user sends 0.6 ETH to the cold wallet
      Then the audit log records the decisions:
        | decision | rule                |
        | sent     | known-destinations  |
        | refused  | unknown-destination |
        | held     | big-transfers       |
      And the audit log records the refused send with the message naming "unknown-destination"
