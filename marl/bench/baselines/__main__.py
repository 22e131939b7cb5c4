"""``python -m marl.bench.baselines --out docs/results/baselines.md``: the baselines page."""

import sys

from marl.bench.baselines.page import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
