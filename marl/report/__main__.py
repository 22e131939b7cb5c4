"""``python -m marl.report``: the same as the ``marl-report`` command."""

import sys

from marl.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
