import sys

from producer.cli import main

sys.exit(main())
