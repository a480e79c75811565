"""Run several `walletcore` CLI commands in one interpreter (one start-up instead of one per
command): `python cli_batch.py '[["clients", "create", "--name", "A"], ...]'`.

Each command goes through `walletcore_cli.main`, exactly as the console script
does, in this process's environment (WALLETCORE_*). Prints the JSON list of each command's
stdout; stops at the first command that fails (exit status 1, its stderr already shown).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from walletcore_cli import main


def run(commands: list[list[str]]) -> int:
    outputs: list[str] = []
    for argv in commands:
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            code = main(argv)
        if code != 0:
            print(f"walletcore {' '.join(argv)} exited {code}", file=sys.stderr)
            return 1
        outputs.append(captured.getvalue())
    sys.stdout.write(json.dumps(outputs))
    return 0


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.argv[1])))
