"""`python -m loopwright.action`."""

import sys

from loopwright.action.run import start

if __name__ == "__main__":
    sys.exit(start())
