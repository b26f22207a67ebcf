"""Porpoise beside Apache Airflow 3 on this machine, in one run (``python -m bench peers airflow``).

Installs Airflow (install.py: pinned VERSION, a venv of its own under .bench-cache/) and starts it privately
(cluster.py: its own PostgreSQL, LocalExecutor with parallelism 16, API server, scheduler, DAG processor) next
to a private Porpoise stack whose worker has as many slots. Then, in interleaved rounds, the same workloads on
each (SHELL / BashOperator ``true``), each started through the product's public API:

- fan-out: one run of N independent tasks; tasks per second from the first task start to the last task end;
- chain: one run of an N-task chain; the gap between one task's end and the next one's start, p50;
- trigger latency: a one-task run started N times one after another; the API call -> its task started, p50;
- many runs: N runs of a 3-task chain started at once; from the first start call to the last run's end.

Each figure is the median over the rounds. Correctness is asserted (every run and task successful, each
task exactly once, on its first try), timings never.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from bench.common import exit_on_sigterm, machine, rounded, workdir
from bench.peers.airflow import results
from bench.peers.airflow.cluster import PARALLELISM, AirflowCluster
from bench.peers.airflow.dags import workload_dags
from bench.peers.airflow.install import VERSION, ensure_airflow
from bench.peers.airflow.porpoise import PorpoiseStack
from bench.peers.airflow.workloads import AirflowWorkloads

DOC = Path(__file__).resolve().parents[3] / "docs" / "BENCHMARKS.md"
MARK = "peers-airflow"
#: the workloads' sizes (issue #31's headline comparison)
SIZES = {"fanout": 200, "chain": 20, "triggers": 5, "runs": 50}


async def _airflow_round(cluster: AirflowCluster, sizes: dict[str, int]) -> dict[str, float]:
    dags = workload_dags(sizes["fanout"], sizes["chain"], sizes["runs"])
    conn = await asyncpg.connect(cluster.dsn, timeout=30)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            token = await cluster.token(session)
            session.headers["Authorization"] = f"Bearer {token}"
            w = AirflowWorkloads(cluster, conn, session)
            out = await w.fanout(dags["fanout"])
            out |= await w.chain(dags["chain"])
            out |= await w.trigger_latency(dags["trigger"], sizes["triggers"])
            out |= await w.many_runs(dags["many"], sizes["runs"])
            return out
    finally:
        await conn.close()


async def _airflow_warm_up(cluster: AirflowCluster) -> None:
    """One run of the one-task DAG: the scheduler and executor are up and a task runs end to end."""
    conn = await asyncpg.connect(cluster.dsn, timeout=30)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            session.headers["Authorization"] = f"Bearer {await cluster.token(session)}"
            await AirflowWorkloads(cluster, conn, session).once(workload_dags(1, 2, 1)["trigger"])
    finally:
        await conn.close()


async def _porpoise_round(porpoise: PorpoiseStack, sizes: dict[str, int]) -> dict[str, float]:
    out = await porpoise.fanout(sizes["fanout"])
    out |= await porpoise.chain(sizes["chain"])
    out |= await porpoise.trigger_latency(sizes["triggers"])
    out |= await porpoise.many_runs(sizes["runs"])
    await porpoise.check()
    return out


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def summary(per_round: dict[str, list[dict[str, float]]], sizes: dict[str, int], asked: int) -> dict[str, Any]:
    """Both systems' figures (medians over the rounds done) and each round's, as one JSON-able object."""
    return {
        "airflow_version": VERSION,
        "parallelism": PARALLELISM,
        "rounds": len(per_round["airflow"]),
        "rounds_asked": asked,
        "sizes": sizes,
        "porpoise": rounded(results.medians(per_round["porpoise"])),
        "airflow": rounded(results.medians(per_round["airflow"])),
        "per_round": {k: [rounded(r) for r in v] for k, v in per_round.items()},
    }


def run(
    rounds: int = 3, sizes: dict[str, int] | None = None, on_round: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """:func:`summary` of ``rounds`` rounds; ``on_round`` is handed the summary so far after each one."""
    sizes = sizes or dict(SIZES)
    airflow_bin = ensure_airflow()
    per_round: dict[str, list[dict[str, float]]] = {"porpoise": [], "airflow": []}
    with workdir() as base, contextlib.ExitStack() as cleanup:
        porpoise = PorpoiseStack(Path(base) / "porpoise")
        cleanup.callback(porpoise.stop)
        _say("starting Porpoise")
        porpoise.start()
        dags = workload_dags(sizes["fanout"], sizes["chain"], sizes["runs"])
        cluster = AirflowCluster(airflow_bin, Path(base) / "airflow", list(dags.values()))
        cleanup.callback(cluster.stop)
        _say(f"starting Airflow {VERSION} (db migrate, API server, scheduler, DAG processor)")
        cluster.start()
        asyncio.run(_airflow_warm_up(cluster))
        asyncio.run(porpoise.trigger_latency(1))  # the same warm-up on Porpoise
        for i in range(rounds):
            _say(f"round {i + 1}/{rounds}: Porpoise")
            per_round["porpoise"].append(asyncio.run(_porpoise_round(porpoise, sizes)))
            _say(f"round {i + 1}/{rounds}: Porpoise {json.dumps(rounded(per_round['porpoise'][-1]))}")
            _say(f"round {i + 1}/{rounds}: Airflow {VERSION}")
            per_round["airflow"].append(asyncio.run(_airflow_round(cluster, sizes)))
            _say(f"round {i + 1}/{rounds}: Airflow {json.dumps(rounded(per_round['airflow'][-1]))}")
            if on_round is not None:
                on_round(summary(per_round, sizes, rounds))
    return summary(per_round, sizes, rounds)


def section(result: dict[str, Any], facts: dict[str, object], command: str) -> str:
    table = results.table(result["porpoise"], result["airflow"], result["sizes"], result["airflow_version"])
    return (
        f"<!-- bench:{MARK} -->\n"
        f"### Porpoise beside Apache Airflow {result['airflow_version']}\n\n"
        f"Command: `{command}`, {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}, commit {facts['commit']}, "
        f"{facts['cpus']} cores, {facts['memory_gib']} GiB, {facts['platform']}, Python {facts['python']}. "
        f"Medians of {_rounds(result)}; both systems run at once on this machine, each with "
        f"its own PostgreSQL, Airflow with the LocalExecutor at parallelism {result['parallelism']}, Porpoise's "
        f"worker with as many slots. Tasks are `true`; every start goes through the product's public API. The "
        "last column is how many times better Porpoise's figure is.\n\n"
        f"{table}\n\n"
        "Each round:\n\n"
        f"{results.rounds_table(result['per_round']['porpoise'], result['per_round']['airflow'])}\n"
        f"<!-- /bench:{MARK} -->"
    )


def _rounds(result: dict[str, Any]) -> str:
    done, asked = result["rounds"], result["rounds_asked"]
    if done == asked:
        return f"{done} interleaved round(s)"
    return f"the first {done} of {asked} interleaved rounds (written after each round; the run ended before the rest)"


def write_section(text: str, block: str) -> str:
    pattern = re.compile(rf"<!-- bench:{MARK} -->.*?<!-- /bench:{MARK} -->", re.S)
    return pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench peers airflow", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (figures are their medians)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    exit_on_sigterm()
    command = "python -m bench peers airflow" + (f" --rounds {args.rounds}" if args.rounds != 3 else "")
    facts = machine()

    def record(result: dict[str, Any]) -> None:
        if not args.no_doc:
            DOC.write_text(write_section(DOC.read_text(), section(result, facts, command)))

    result = run(args.rounds, on_round=record)
    print(json.dumps(result), flush=True)
    print(results.table(result["porpoise"], result["airflow"], result["sizes"], VERSION), flush=True)
    return 0
