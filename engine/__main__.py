"""python -m engine == the porpoise CLI."""

import sys

from engine.cli import main

sys.exit(main())
