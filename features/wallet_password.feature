@wallets
Feature: The wallet password
  Every user wallet is locked by a password that the api client chooses when it creates
  the wallet. The password unlocks the wallet's keys whenever they are needed: to send
  funds, or to add addresses for chains enabled later. It is never stored: nobody, not
  the operator and not support, can recover it or change it. The 24-word seed phrase,
  shown once when the wallet is created, is the only other way to the keys.

  The platform wallet of an api client has no password: the operator's secret locks it.

  Background:
    Given an api client enabled for BTC, ETH and USDT on TRON

  Rule: A wallet is created with a password of 8 to 256 characters

    Scenario: Creating a wallet shows its seed phrase and one address per enabled chain
      When the api client creates a wallet with the password "correct horse battery"
      Then the request succeeds
      And the answer shows a seed phrase of 24 words
      And the answer has addresses for BITCOIN, ETHEREUM and TRON, in that order

    Scenario Outline: A password outside the rules is refused and no wallet is made
      When the api client creates a wallet with <password>
      Then the request fails with status 400 and the message "<message>"

      Examples:
        | password                          | message                               |
        | the password "seven77"            | password must be 8 to 256 characters  |
        | a password of 257 characters      | password must be 8 to 256 characters  |
        | no password                       | password is required                  |
        | a number instead of a password    | password must be a string             |

    Scenario Outline: The shortest and the longest passwords are accepted
      When the api client creates a wallet with <password>
      Then the request succeeds

      Examples:
        | password                          |
        | the password "8 chars!"           |
        | a password of 256 characters      |

  Rule: The seed phrase is shown once and never again

    Scenario: Asking for the addresses later shows no seed phrase
      Given a wallet created with the password "correct horse battery"
      When the api client asks for the wallet's addresses
      Then the answer has the addresses shown at creation
      And no answer, log line or audit entry since creation holds the seed phrase or the password

  Rule: Adding addresses for newly enabled chains needs the wallet password

    Scenario: The right password adds the chains enabled since creation
      Given a wallet created with the password "correct horse battery"
      And the operator enables SOL for the api client
      When the api client extends the wallet with the password "correct horse battery"
      Then the request succeeds
      And the answer has addresses for BITCOIN, ETHEREUM, TRON and SOLANA, in that order
      And the addresses shown at creation are unchanged

    Scenario: A wrong password is refused and changes nothing
      Given a wallet created with the password "correct horse battery"
      And the operator enables SOL for the api client
      When the api client extends the wallet with the password "correct horse battery!"
      Then the request fails with status 401 and the message "Invalid credentials"
      And the wallet still has addresses for BITCOIN, ETHEREUM and TRON only

    Scenario: A password is exact: letter case and spaces count
      Given a wallet created with the password "correct horse battery"
      When the api client extends the wallet with the password "Correct Horse Battery"
      Then the request fails with status 401 and the message "Invalid credentials"

    Scenario: Another api client cannot reach the wallet, even with its password
      Given a wallet created with the password "correct horse battery"
      And another api client with a user of its own
      When the other api client extends the wallet with the password "correct horse battery"
      Then the request fails with status 404 and the message "User not found"

  Rule: A wrong password on a transfer is refused before anything is signed, and the answer depends on the chain

    Scenario Outline: The answer to a wrong wallet password on <chain>
      Given the operator enables every asset for the api client
      And a wallet created with the password "correct horse battery"
      When a transfer on <chain> is attempted with the password "battery horse correct"
      Then the request fails with status <status> and the message "<message>"
      And nothing was signed

      Examples:
        | chain    | status | message             |
        | BITCOIN  | 400    | Invalid password    |
        | ETHEREUM | 401    | Invalid credentials |
        | BSC      | 401    | Invalid credentials |
        | TRON     | 401    | Invalid credentials |
        | POLYGON  | 401    | Invalid credentials |
        | SOLANA   | 401    | Invalid password    |

    Scenario Outline: The right password unlocks the key of the wallet's <chain> address
      Given the operator enables every asset for the api client
      And a wallet created with the password "correct horse battery"
      When a transfer on <chain> is attempted with the password "correct horse battery"
      Then the transfer is signed by the key of the wallet's <chain> address

      Examples:
        | chain    |
        | BITCOIN  |
        | ETHEREUM |
        | TRON     |
        | SOLANA   |

  Rule: The platform wallet is locked by the operator's secret, not by a password

    Scenario: The platform wallet has no addresses until the operator provisions it
      When the api client asks for its platform wallet's addresses
      Then the request fails with status 404

    Scenario: Provisioning the platform wallet twice gives the same wallet
      Given the operator has provisioned the api client's platform wallet
      When the operator provisions it again
      Then the addresses are the same as the first time
      And the api client's platform wallet shows them for BITCOIN, ETHEREUM and TRON

  Rule: A send with a wrong password is refused before anything leaves the wallet, and the answer depends on the chain

    Scenario Outline: Sending <coin> with a wrong password, then again with the right one
      Given the operator enables every asset for the api client
      And a wallet created with the password "correct horse battery"
      And the wallet holds 10 <coin>
      When the api client sends 1 <coin> from the wallet with the password "battery horse correct"
      Then the request fails with status <status> and the message "<message>"
      And nothing has left the wallet
      When the api client sends it again, under the same request id, with the password "correct horse battery"
      Then the request succeeds
      And one transfer has left the wallet
      And no answer, log line or audit entry since creation holds the seed phrase or the password

      Examples:
        | coin | status | message             |
        | BTC  | 400    | Invalid password    |
        | ETH  | 401    | Invalid credentials |
        | BNB  | 401    | Invalid credentials |
        | TRX  | 401    | Invalid credentials |
        | POL  | 401    | Invalid credentials |
        | SOL  | 401    | Invalid password    |
