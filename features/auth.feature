@auth
Feature: Authentication of api clients
  An api client (the integrating application) holds a client id and an api key, issued
  once by the operator. It exchanges them for a bearer token that lasts 15 minutes and
  sends that token on every other request. There is no refresh: when the token expires,
  the client authenticates again with the same credentials.

  A 401 has two meanings, told apart by its message:
    - "Missing or expired token": get a new token and retry;
    - "Invalid credentials": the client id or api key is wrong; stop.

  Background:
    Given an api client enabled for BTC and ETH

  Rule: Valid credentials give a token that lasts 15 minutes

    Scenario: Authenticating with valid credentials
      When the api client authenticates with its client id and api key
      Then it receives a token
      And the token expires 15 minutes after it was issued
      And a request with the token is accepted

    Scenario: A token works until the end of its lifetime
      Given the api client holds a token
      When 14 minutes and 59 seconds pass
      Then a request with the token is accepted

    Scenario: A token stops working after 15 minutes, and authenticating again gives a new one
      Given the api client holds a token
      When 15 minutes pass
      Then a request with the token is refused with 401 "Missing or expired token"
      When the api client authenticates again with the same credentials
      Then a request with the new token is accepted
      And the new token expires 15 minutes after it was issued

  Rule: A request needs a token the service issued, unaltered and still live

    Scenario: A request without a token
      Then a request without a token is refused with 401 "Missing or expired token"

    Scenario Outline: A request with a token that is not a live token of the service
      Given the api client holds a token
      Then a request with <a token> is refused with 401 "Missing or expired token"

      Examples:
        | a token                                            |
        | the token whose signature was altered              |
        | the token whose expiry was pushed back             |
        | the token re-signed by another service             |
        | the token claiming another signing algorithm       |
        | the token stripped of its signature                |
        | the token sent under another scheme than Bearer    |
        | a string that is not a token at all                |

  Rule: Wrong credentials are refused with "Invalid credentials", whatever was wrong

    Scenario Outline: Authenticating with wrong credentials
      When the api client authenticates with <credentials>
      Then the authentication is refused with 401 "Invalid credentials"
      And no token is issued

      Examples:
        | credentials                                    |
        | its client id and a wrong api key              |
        | its client id and no api key                   |
        | an unknown client id and its api key           |
        | a client id that is not an id and its api key  |
        | no client id and its api key                   |
        | its client id and another api client's key     |

  Rule: The api key is kept only as a SHA-256 hash

    Scenario: The service never stores the api key itself
      Given the api client holds a token
      When the api client authenticates with its client id and a wrong api key
      Then the stored api client holds the SHA-256 hash of its api key
      And the api key appears nowhere in storage or in the audit log

    Scenario: A successful authentication, and the first failed one after it, are audited with their request ids
      When the api client authenticates with its client id and its api key
      And the api client authenticates with its client id and a wrong api key
      Then the audit log records the authentications with their request ids and outcomes "ok" and "401"

  Rule: Failed authentications grow no storage: they are counted on the api client they name

    Scenario: A run of failed authentications is counted on the api client and audited once
      When the api client authenticates 5 times with its client id and a wrong api key
      Then the operator sees 5 failed authentications of the api client, from the first to the last
      And the audit log holds one refused authentication of the api client, the first of the run
      When the api client authenticates with its client id and its api key
      Then it receives a token
      And the operator sees no failed authentication of the api client since then
      And the audit log records that the authentication ended a run of 5 failed ones

    Scenario: Failed authentications with an unknown or malformed client id leave nothing in storage
      When the api client authenticates 5 times with an unknown client id and its api key
      And the api client authenticates 5 times with a client id that is not an id and its api key
      And the api client authenticates 5 times with no client id and its api key
      Then every one of them is refused with 401 "Invalid credentials"
      And the api clients and the audit log are as they were before

  Rule: The operator can disable an api client or rotate its key

    Scenario: A disabled api client cannot authenticate, and its tokens stop working
      Given the api client holds a token
      When the operator disables the api client
      Then the api client authenticating with its client id and api key is refused with 401 "Invalid credentials"
      And a request with the token is refused with 401 "Missing or expired token"

    Scenario: Rotating the api key invalidates the old key and every token issued under it
      Given the api client holds a token
      When the operator rotates the api client's key
      Then the api client authenticating with its client id and old api key is refused with 401 "Invalid credentials"
      And a request with the old token is refused with 401 "Missing or expired token"
      When the api client authenticates with its client id and new api key
      Then a request with the new token is accepted
      And the stored api client holds the SHA-256 hash of its new api key

    Scenario: Rotating one api client's key leaves other api clients alone
      Given another api client with a user of its own
      And the other api client holds a token
      When the operator rotates the api client's key
      Then a request with the other api client's token is accepted
