"""python -m engine.worker"""

import sys

from engine.node import main
from engine.worker.server import Worker

sys.exit(main(Worker))
