"""Background work of a walletcore deployment (`pip install 'walletcore[jobs]'`,
docs/operations.md): jobs that must run whether or not a client polls, on procrastinate (a
task queue on PostgreSQL) so that any number of HTTP instances and `walletcore worker`
processes share them with no job done twice."""
