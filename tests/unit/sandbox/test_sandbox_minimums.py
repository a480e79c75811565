"""The sandbox chain's minimums (BITCOIN's `SandboxRules`) agree with the real chains': BITCOIN's dust limit read from
an address's form is the node's for its locking script (`walletcore_chains.bitcoin.coins`)."""

from __future__ import annotations

import pytest

from walletcore_chains.bitcoin.chain import btc_dust_limit
from walletcore_chains.bitcoin.coins import dust_limit

P2WPKH, P2WSH_OR_P2TR, P2SH, P2PKH = (22, True), (34, True), (23, False), (25, False)


@pytest.mark.parametrize(
    ("address", "script"),
    [
        ("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", P2WPKH),
        ("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", P2WPKH),
        ("bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw", P2WPKH),
        ("BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", P2WPKH),
        ("bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3", P2WSH_OR_P2TR),
        ("bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr", P2WSH_OR_P2TR),
        ("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", P2SH),
        ("2MzQwSSnBHWHqSAqtTVQ6v47XtaisrJa1Vc", P2SH),
        ("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", P2PKH),
        ("mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn", P2PKH),
    ],
)
def test_the_dust_limit_of_an_address_is_the_nodes_for_its_script(
    address: str, script: tuple[int, bool]
) -> None:
    assert btc_dust_limit(address) == dust_limit(*script)


def test_the_limits_the_chains_name() -> None:
    assert dust_limit(*P2WPKH) == 294 and dust_limit(*P2PKH) == 546
    assert dust_limit(*P2WSH_OR_P2TR) == 330 and dust_limit(*P2SH) == 540
