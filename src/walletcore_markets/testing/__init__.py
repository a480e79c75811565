"""Loopback servers speaking the real APIs of the providers `walletcore_markets` talks to,
for tests with no network (built on `walletcore.testing.http.LoopbackHttpServer`)."""
