"""``python -m marl.experiment`` is ``marl-run``."""

from marl.experiment.cli import main

if __name__ == "__main__":
    main()
