"""`python -m loopwright.cli`: the console script, also how secrets leave the environment
block (cli.main.entry re-executes itself this way)."""

import sys

from loopwright.cli.main import entry

sys.exit(entry())
