"""python -m engine.master"""

import sys

from engine.master.server import Master
from engine.node import main

sys.exit(main(Master))
