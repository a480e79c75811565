"""Use cases, one module per group: auth, market, trading, wallets."""
