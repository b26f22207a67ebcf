import sys

from bench.peers.airflow import main

sys.exit(main(sys.argv[1:]))
