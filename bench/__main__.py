"""make bench: run every benchmark at full size and rewrite its section of docs/BENCHMARKS.md.

``python -m bench peers <name>``: the comparison with another scheduler (bench/peers/<name>/), which installs
that scheduler first; never part of ``make bench`` or the tests' tiny round."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import re
import sys
from pathlib import Path

from bench.common import exit_on_sigterm, machine
from bench.quick import insane, reference_block, write_reference
from core import logs

BENCHMARKS = [
    "registry",
    "engine",
    "steps",
    "failover",
    "scale",
    "hosts",
    "history",
    "ui",
    "spark",
    "sql",
    "jars",
    "resources",
]
#: too heavy for the tiny round `make test` runs (spark: four Spark JVMs and a dozen Spark applications; jars:
#: two javac builds and a JVM job per kind, 4-6 minutes at load 15 on two cores): what they measure is proven
#: by real processes in tests/test_spark_cluster.py, tests/test_spark_connect.py, tests/test_mr.py and
#: tests/test_spark_jar.py
NOT_IN_SMOKE = frozenset({"spark", "jars"})
DOC = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
#: the schedulers ``python -m bench peers <name>`` compares Porpoise with (bench/peers/<name>/)
PEERS = ("airflow",)


def section(name: str, result: dict[str, object], facts: dict[str, object]) -> str:
    rows = "\n".join(f"| {k} | {v} |" for k, v in result.items() if k not in ("benchmark", "size"))
    return (
        f"<!-- bench:{name} -->\n"
        f"### {name}\n\n"
        f"Command: `make bench` (`python -m bench.{name}`), {dt.date.today().isoformat()}, "
        f"commit {facts['commit']}, "
        f"{facts['cpus']} cores, {facts['memory_gib']} GiB, Python {facts['python']}.\n\n"
        f"| metric | value |\n|---|---|\n{rows}\n"
        f"<!-- /bench:{name} -->"
    )


def main(argv: list[str]) -> int:
    logs.configure("console", "warning")
    exit_on_sigterm()
    if argv[:1] == ["peers"]:
        if len(argv) < 2 or argv[1] not in PEERS:
            print(f"usage: python -m bench peers {{{'|'.join(PEERS)}}} [--rounds N] [--no-doc]", file=sys.stderr)
            return 2
        return int(importlib.import_module(f"bench.peers.{argv[1]}").main(argv[2:]))
    size = argv[0] if argv else "full"
    names = argv[1:] or BENCHMARKS  # python -m bench full failover: just that one
    facts = machine()
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    for name in names:
        result = importlib.import_module(f"bench.{name}").run(size)
        print(json.dumps(result), flush=True)
        block = section(name, result, facts)
        pattern = re.compile(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->", re.S)
        text = (
            pattern.sub(lambda _m, b=block: b, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
        )
        if name == "engine" and insane(result):  # its ratios to the spawn limit mean nothing
            print(f"not written as the bench-quick reference: {'; '.join(insane(result))}", flush=True)
        elif name == "engine":  # what make bench-quick compares with
            text = write_reference(text, reference_block(result, facts))
    if size == "full":
        DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
