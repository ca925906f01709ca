"""``python -m producer``: the producer's command line (producer/cli.py)."""

import sys

from producer.cli import main

if __name__ == "__main__":
    sys.exit(main())
