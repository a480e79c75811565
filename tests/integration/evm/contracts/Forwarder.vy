# pragma version ~=0.4.0
# Moves the coin inside contract calls, for the deposit scan's tests: the value of a call
# goes on to addresses named in its calldata.


@external
@payable
def forward(to: address):
    """All the value to `to`: one CALL below the transaction."""
    send(to, msg.value)


@external
@payable
def split(first: address, second: address):
    """Half the value to `first`, the rest to `second`: two CALLs."""
    half: uint256 = msg.value // 2
    send(first, half)
    send(second, msg.value - half)


@external
@payable
def forward_and_fail(to: address):
    """The value to `to`, then a revert: nothing moves."""
    send(to, msg.value)
    raise "refused"


@external
@payable
def relay(other: address, to: address):
    """`other.forward(to)` with the value: a CALL two levels down."""
    raw_call(other, abi_encode(to, method_id=method_id("forward(address)")), value=msg.value)


@external
@payable
def relay_failing(other: address, to: address) -> bool:
    """`other.forward_and_fail(to)` with the value, its revert swallowed: the transaction
    succeeds, the value stays here."""
    return raw_call(
        other,
        abi_encode(to, method_id=method_id("forward_and_fail(address)")),
        value=msg.value,
        revert_on_failure=False,
    )


@external
@payable
def __default__():
    pass
