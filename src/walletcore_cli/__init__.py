"""The operator CLI, console script `walletcore`: a composition root of its own.

    walletcore --version
    walletcore serve [--host 127.0.0.1] [--port 8000] [--workers N] [--server granian|uvicorn]
    walletcore worker [--concurrency N]
    walletcore clients create --name NAME [--assets 1,2,21] [--fee-payer USER|PLATFORM]
    walletcore clients list
    walletcore clients update ID [--name NAME] [--assets 1,2,21] [--fee-payer USER|PLATFORM]
                                 [--fee-payer-asset ID=USER|PLATFORM ...]
    walletcore clients enable ID
    walletcore clients disable ID
    walletcore clients rotate ID
    walletcore platform provision --client-id ID
    walletcore platform balances ID
    walletcore platform cpfp ID --txid TXID [--fee-rate SAT_PER_VB]
    walletcore db upgrade | current
    walletcore sandbox fund --chain C --address A --asset ID --amount X
    walletcore nonces show --chain C --address A
    walletcore nonces reset --chain C --address A [--to N]
    walletcore sends list [--limit N]
    walletcore sends show | bump | cancel CLIENT_ID REQUEST_ID

Every command reads the same settings (`WALLETCORE_*`, `walletcore.settings.Settings`), as
`walletcore serve` and `create_container()` do: the storage defaults to `sql`, the SQLite
database under `WALLETCORE_HOME` on the sandbox profile, so a client created here
authenticates against a running `walletcore serve` at once. Results are JSON on stdout;
messages go to stderr, the first of them `walletcore: home <absolute path>`. Exit status:
0 done, 1 refused by the core (the message says why), 2 bad usage or configuration.

Unlike the adapters, this package may import every package of the project (`walletcore`,
`walletcore_litestar`, `walletcore_sql`, `walletcore_chains`, `walletcore_sandbox`); none of
them imports it. Each is imported when a command needs it, so a command starts quickly.
"""

from walletcore_cli.main import main

__all__ = ["main"]
