@trades
Feature: Trade lifecycle
  A trade starts as an open quote: an indicative price for buying or selling a crypto
  asset against a fiat currency, valid for about one minute. Nothing is bought or sold
  until the user approves the quote. Approval prices the order again, holding the
  amount the user asked for (the fixed leg) and moving the other one.

  In the sandbox, the venue decides every approval by the amount the quote was asked
  for (its fixed leg):
    - 502 is rejected by the venue: nothing trades and the trade fails;
    - 504 times out: the outcome is unknown until the trade is checked again;
    - 202 is accepted and worked: it settles when the trade is checked again;
    - 203 is accepted and worked but never settles;
    - any other amount settles at once.

  Background:
    Given an api client enabled for BTC, ETH and USDT on TRON
    And a user of that api client

  Rule: A quote is an open trade, and nothing trades until it is approved

    Scenario: A sell quote is created open
      When the user asks to sell 0.5 BTC for USD
      Then the request succeeds
      And the answer is a sell trade of BTC in USD
      And the answer shows the trade open
      And the answer shows a crypto amount of "0.5"
      And the amounts in the answer agree with its price
      And the top-level figures are the quoted figures
      And the answer has no approval time and no completion time
      And the quote expires one minute after it was created
      And nothing has been sent to the venue

    Scenario: A sell quote for a fiat amount derives the crypto amount
      When the user asks to sell BTC worth 1000 USD
      Then the answer shows the trade open
      And the answer shows a fiat amount of "1000"
      And the amounts in the answer agree with its price

    Scenario: A buy quote mirrors a sell quote
      When the user asks to buy 2 ETH with EUR
      Then the request succeeds
      And the answer is a buy trade of ETH in EUR
      And the answer shows the trade open
      And the answer shows a crypto amount of "2"
      And the amounts in the answer agree with its price
      And the answer has no approval time and no completion time
      And the quote expires one minute after it was created
      And nothing has been sent to the venue

    Scenario: A buy quote for a fiat amount is approved like a sell quote
      Given the user has an open quote to buy ETH worth 250 GBP
      When the user approves the trade
      Then the answer shows the trade completed
      And the answer is a buy trade of ETH in GBP
      And the answer shows a fiat amount of "250"
      And the amounts in the answer agree with its price

    Scenario: The fiat defaults to USD when the quote names none
      When the user asks to sell 0.25 ETH without naming a fiat
      Then the answer is a sell trade of ETH in USD

  Rule: An unapproved quote lapses on its own

    Scenario: A quote is still open just before its lifetime ends
      Given the user has an open quote to sell 0.5 BTC for USD
      When 59 seconds pass
      And the user checks the trade
      Then the answer shows the trade open

    Scenario: An unapproved quote reads as expired after its lifetime
      Given the user has an open quote to sell 0.5 BTC for USD
      When the quote lifetime passes
      And the user checks the trade
      Then the answer shows the trade expired
      And the answer has no approval time
      And the answer's completion time is the moment the quote lapsed
      And the quote in the answer is exactly the quote first offered

    Scenario: A lapsed quote is listed as expired, never approved
      Given the user has an open quote to sell 0.5 BTC for USD
      When the quote lifetime passes
      And the user lists their trades with status "expired"
      Then the list shows, newest first:
        | side | status  | approvedAt |
        | sell | expired |            |

  Rule: Approving a live open quote trades it, once

    Scenario: Approving a live open quote settles the trade
      Given the user has an open quote to sell 0.5 BTC for USD
      When the user approves the trade
      Then the request succeeds
      And the answer shows the trade completed
      And the trade is completed
      And the answer has an approval time and a completion time
      And the venue has been asked to execute 1 order

    Scenario: Approval holds the fixed leg, moves the other, and leaves the quote as it was
      Given the user has an open quote to sell 0.5 BTC for USD
      And the market moves before the user approves
      When the user approves the trade
      Then the answer shows the trade completed
      And the answer shows a crypto amount of "0.5"
      And the price in the answer is the market price at the moment of approval
      And the price in the answer differs from the quoted price
      And the amounts in the answer agree with its price
      And the quote in the answer is exactly the quote first offered

    Scenario: Top-level figures are the best known figures at every stage
      Given the user has an open quote to sell BTC worth 202 USD
      And the market moves before the user approves
      When the user checks the trade
      Then the top-level figures are the quoted figures
      When the user approves the trade
      Then the answer shows the trade approved
      And the answer has an approval time but no completion time
      And the price in the answer is the market price at the moment of approval
      And the price in the answer differs from the quoted price
      And the answer shows a fiat amount of "202"
      When the user checks the trade
      Then the answer shows the trade completed
      And the price in the answer is the market price at the moment of approval
      And the answer shows a fiat amount of "202"
      And the quote in the answer is exactly the quote first offered

    Scenario: Approving a completed trade replays the original result
      Given the user has a completed trade
      When the user approves the trade again
      Then the request succeeds
      And the answer is exactly the earlier answer
      And the venue has been asked to execute 1 order

    Scenario: Approvals arriving together trade once
      Given the user has an open quote to sell 0.5 BTC for USD
      When the user approves the trade 20 times at once
      Then exactly one approval went through and every other one was refused or replayed
      And the venue has been asked to execute 1 order
      And the trade is completed

  Rule: A lapsed quote cannot be approved

    Scenario: Approving an open quote after it has lapsed expires it
      Given the user has an open quote to sell 0.5 BTC for USD
      And the quote lifetime has passed
      When the user approves the trade
      Then the request fails with status 409
      And the trade is expired
      And nothing has been sent to the venue

    Scenario: An order accepted but never settled expires when approved after the quote lapsed
      Given the user has an approved trade that the venue never settles
      When the quote lifetime passes
      And the user approves the trade again
      Then the request fails with status 409
      And the trade is expired
      And the venue has been asked to execute 1 order

    Scenario: An accepted order the venue settled meanwhile is recorded, not expired
      Given the user has an approved trade
      When the quote lifetime passes
      And the user approves the trade again
      Then the trade is completed
      And the venue has been asked to execute 1 order

  Rule: A sell is backed by what the user's wallet holds

    Scenario: A sell quote for more than the wallet holds is refused
      Given the user's wallet holds 0.2 BTC
      When the user asks to sell 0.5 BTC for USD
      Then the request fails with status 400 and the message "The wallet holds 0.2 BTC, less than the 0.5 BTC to sell"
      And nothing has been sent to the venue

    Scenario: A sell quote for a fiat amount is backed by the crypto it derives
      Given the user's wallet holds 0.000001 BTC
      When the user asks to sell BTC worth 1000 USD
      Then the request fails with status 400

    Scenario: A sell the wallet no longer covers cannot be approved
      Given the user has an open quote to sell 0.5 BTC for USD
      And the user's wallet holds 0.1 BTC
      When the user approves the trade
      Then the request fails with status 400
      And the trade is open
      And nothing has been sent to the venue

    Scenario: A buy needs no holdings of the asset
      Given the user's wallet holds 0 BTC
      When the user asks to buy 0.5 BTC with USD
      Then the request succeeds

  Rule: A quote's amount is within the asset's trade bounds

    Every asset has a minimum and a maximum trade, in the coin, set by the operator: by
    default a dollar or less of the coin at the bottom (never less than what shows as
    0.000001) and what a large exchange takes in one order at the top. A fiat amount is
    held to the same bounds through the crypto it buys or sells.

    Scenario: A quote under the asset's minimum trade is refused and nothing is kept
      When the user asks to buy 0.000000000000000001 ETH with USD
      Then the request fails with status 400 and the message "cryptoAmount is below the minimum trade of 0.0001 ETH"
      And nothing has been sent to the venue
      When the user lists their trades
      Then the list is empty

    Scenario: A quote over the asset's maximum trade is refused
      When the user asks to sell 1000.00000001 BTC for USD
      Then the request fails with status 400 and the message "cryptoAmount is above the maximum trade of 1000 BTC"

    Scenario: A fiat amount that buys less than the minimum trade is refused
      When the user asks to buy ETH worth 0.01 USD
      Then the request fails with status 400 and a message starting "fiatAmount is below the minimum trade of 0.0001 ETH ("

    Scenario Outline: Amounts at the bounds are quoted
      When the user asks to <request>
      Then the answer shows the trade open

      Examples:
        | request                     |
        | buy 0.0001 ETH with USD     |
        | sell 1000 BTC for USD       |
        | buy 1 USDT on TRON with USD |

    Scenario: The operator sets an asset's bounds
      Given the operator bounds trades of ETH between 0.5 and 2 ETH
      When the user asks to buy 0.4 ETH with USD
      Then the request fails with status 400 and the message "cryptoAmount is below the minimum trade of 0.5 ETH"
      When the user asks to sell 2.5 ETH for USD
      Then the request fails with status 400 and the message "cryptoAmount is above the maximum trade of 2 ETH"
      When the user asks to buy 2 ETH with USD
      Then the answer shows the trade open

  Rule: A rejected order fails the trade and nothing trades

    Scenario: The venue rejects the order
      Given the user has an open quote to sell BTC worth 502 USD
      When the user approves the trade
      Then the request fails with status 502 and a message starting "Order rejected: "
      And the trade is failed
      And the trade carries a failure reason
      And the trade has a completion time

    Scenario: A rejection of a crypto amount fails the trade the same way
      Given the user has an open quote to buy 502 USDT on TRON with USD
      When the user approves the trade
      Then the request fails with status 502 and a message starting "Order rejected: "
      And the trade is failed

  Rule: An executing trade is in flight: poll it, never approve it again

    Scenario: A venue timeout leaves the trade executing until a check resolves it
      Given the user has an open quote to sell BTC worth 504 USD
      When the user approves the trade
      Then the request fails with status 504
      And the trade is executing
      When the user checks the trade
      Then the answer shows the trade completed
      And the answer shows a fiat amount of "504"
      And the venue has been asked to execute 1 order

    Scenario: Approving an executing trade is refused
      Given the user has an executing trade
      When the user approves the trade again
      Then the request fails with status 409
      And the trade is executing
      And the venue has been asked to execute 1 order

    Scenario: An order accepted and being worked cannot be approved again
      Given the user has an approved trade
      When the user approves the trade again
      Then the request fails with status 409
      And the trade is approved
      And the venue has been asked to execute 1 order

    Scenario: An accepted order settles when the trade is checked
      Given the user has an open quote to sell BTC worth 202 USD
      When the user approves the trade
      Then the request succeeds
      And the answer shows the trade approved
      When the user checks the trade
      Then the answer shows the trade completed
      And the answer has an approval time and a completion time
      And the venue has been asked to execute 1 order

  Rule: A trade that has ended cannot be approved

    Scenario Outline: Approving a <status> trade is refused and changes nothing
      Given the user has a <status> trade
      When the user approves the trade
      Then the request fails with status 409
      And the trade is unchanged

      Examples:
        | status    |
        | expired   |
        | failed    |
        | cancelled |

  Rule: Only an open quote can be cancelled

    Scenario: Cancelling an open quote
      Given the user has an open quote to sell 0.5 BTC for USD
      When the user cancels the trade
      Then the request succeeds
      And the answer shows the trade cancelled
      And the trade is cancelled
      And nothing has been sent to the venue

    Scenario: Cancelling a cancelled trade returns it unchanged
      Given the user has a cancelled trade
      When 5 seconds pass
      And the user cancels the trade again
      Then the request succeeds
      And the answer is exactly the earlier answer

    Scenario Outline: Cancelling a <status> trade is refused
      Given the user has <article> <status> trade
      When the user cancels the trade
      Then the request fails with status 409
      And the trade is unchanged

      Examples:
        | article | status    |
        | an      | approved  |
        | an      | executing |
        | a       | completed |
        | a       | failed    |
        | an      | expired   |

    Scenario: A cancelled quote can no longer be approved
      Given the user has a cancelled trade
      When the user approves the trade
      Then the request fails with status 409
      And nothing has been sent to the venue

  Rule: A trade is visible only to its own user of its own api client

    Scenario Outline: Another user's trade does not exist for them
      Given the user has an open quote to sell 0.5 BTC for USD
      And another user of the same api client
      When another user of the same api client <verb> the trade
      Then the request fails with status 404
      And the answer is the same as for a trade that does not exist
      And the trade is unchanged

      Examples:
        | verb     |
        | checks   |
        | approves |
        | cancels  |

    Scenario Outline: Another api client's trade does not exist for it
      Given the user has an open quote to sell 0.5 BTC for USD
      And another api client with a user of its own
      When another api client <verb> the trade on behalf of the user
      Then the request fails with status 404
      And the answer is the same as for a trade that does not exist
      And the trade is unchanged
      And nothing has been sent to the venue

      Examples:
        | verb     |
        | checks   |
        | approves |
        | cancels  |

  Rule: The trade list is newest first, one page of 10, filtered on request

    Scenario: The list holds the ten newest trades, newest first
      Given the user has made 12 quotes, one second apart
      When the user lists their trades
      Then 10 trades are listed, newest first
      And they are the 10 most recent quotes

    Scenario: Both sides are in one list, and filters narrow it
      Given the user has these trades, one second apart:
        | side | status    |
        | sell | completed |
        | buy  | open      |
        | sell | cancelled |
        | buy  | completed |
      When the user lists their trades
      Then the list shows, newest first:
        | side | status    |
        | buy  | completed |
        | sell | cancelled |
        | buy  | open      |
        | sell | completed |
      When the user lists their trades with side "buy"
      Then the list shows, newest first:
        | side | status    |
        | buy  | completed |
        | buy  | open      |
      When the user lists their trades with status "completed"
      Then the list shows, newest first:
        | side | status    |
        | buy  | completed |
        | sell | completed |

    Scenario: Only the user's own trades are listed
      Given another user of the same api client
      And another user of the same api client has a trade
      And the user has an open quote to sell 0.5 BTC for USD
      When the user lists their trades
      Then the list shows, newest first:
        | side | status |
        | sell | open   |

    Scenario: A user who never traded has an empty list
      When the user lists their trades
      Then the list is empty

    Scenario Outline: A filter outside the allowed values is refused
      When the user lists their trades with <filter> "<value>"
      Then the request fails with status 400

      Examples:
        | filter | value    |
        | side   | sideways |
        | side   | SELL     |
        | status | pending  |
        | status | OPEN     |

  Rule: A quote request must be well formed

    Scenario: Naming both amounts is refused
      When the user asks to sell BTC for USD giving both amounts
      Then the request fails with status 400 and a message naming "cryptoAmount"

    Scenario: Naming neither amount is refused
      When the user asks to sell BTC for USD giving neither amount
      Then the request fails with status 400 and a message naming "fiatAmount"

    Scenario Outline: An amount with more decimal places than the asset allows is refused
      When the user asks to <request>
      Then the request fails with status 400 and a message naming "<field>"

      Examples:
        | request                              | field        |
        | sell 0.123456789 BTC for USD         | cryptoAmount |
        | buy 1.1234567 USDT on TRON with USD  | cryptoAmount |
        | sell BTC worth 100.001 USD           | fiatAmount   |

    Scenario Outline: An amount at the asset's precision is accepted
      When the user asks to <request>
      Then the answer shows the trade open

      Examples:
        | request                                 |
        | sell 0.12345678 BTC for USD             |
        | sell 1.123456789012345678 ETH for USD   |
        | buy 1.123456 USDT on TRON with USD      |
        | sell BTC worth 100.01 USD               |

    Scenario Outline: An amount that is not a plain positive decimal is refused
      When the user asks to sell <amount> BTC for USD
      Then the request fails with status 400 and a message naming "cryptoAmount"

      Examples:
        | amount |
        | 0      |
        | 0.000  |
        | -1     |
        | 1e5    |
        | NaN    |
        | 1,5    |
        | .5     |

    Scenario: An unknown fiat is refused
      When the user asks to sell 0.5 BTC for XYZ
      Then the request fails with status 400 and a message naming "fiat"

    Scenario Outline: An asset outside the catalog is unknown
      When the user asks to sell 1 unit of asset <asset> for USD
      Then the request fails with status 400 and the message "Unknown assetId"

      Examples:
        | asset |
        | 7     |
        | 0     |
        | 63    |

    Scenario: An asset not enabled for the api client is forbidden
      When the user asks to sell 1 SOL for USD
      Then the request fails with status 403

    Scenario: An asset limited on this environment is unknown
      Given the environment limits ETH
      When the user asks to sell 1 ETH for USD
      Then the request fails with status 400 and the message "Unknown assetId"

    Scenario: Trading unavailable for an asset
      Given trading is unavailable for ETH on this environment
      When the user asks to buy 1 ETH with USD
      Then the request fails with status 503
      And nothing has been sent to the venue

    Scenario: An open quote whose asset became unavailable cannot be approved
      Given the user has an open quote to sell 1 ETH for USD
      And trading is unavailable for ETH on this environment
      When the user approves the trade
      Then the request fails with status 503
      And the trade is open
      And nothing has been sent to the venue

    Scenario: A quote for a user who does not exist
      When a quote to sell 0.5 BTC for USD is asked for a user who does not exist
      Then the request fails with status 404
