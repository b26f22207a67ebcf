"""Benchmarks. Each module has ``run(size) -> dict`` and prints one JSON object when run as a script;
``python -m bench`` (make bench) runs them all and rewrites docs/BENCHMARKS.md."""
