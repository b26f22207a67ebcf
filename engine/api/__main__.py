"""python -m engine.api"""

import sys

from engine.api.server import main

sys.exit(main())
