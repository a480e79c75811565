"""`python -m walletcore_cli ...`: the `walletcore` console script."""

import sys

from walletcore_cli.main import main

sys.exit(main())
