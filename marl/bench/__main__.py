"""``python -m marl.bench``: the same as the ``marl-bench`` command."""

import sys

from marl.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
