"""The ``porpoise`` command line.

    porpoise apply FILE                                 create / update workflows from a YAML file
    porpoise start NAME [--param k=v ...] [--watch]     start a workflow
    porpoise list [--workflows] [--state S]             recent instances (or definitions)
    porpoise status ID | watch ID                       an instance and its tasks (watch: live, to the end)
    porpoise logs TASK_ID [--follow]                    a task's log
    porpoise stop | pause | resume ID                   control an instance
    porpoise cluster                                    live masters and workers
    porpoise worker drain|undrain HOST                  a worker takes no new tasks (running ones finish)
    porpoise datasource list|put|test|delete [NAME]     data sources of SQL / PROCEDURE tasks (test: SELECT 1)
    porpoise standalone [--run-dir DIR] [--example] [--spark local|cluster|connect]
                                                        all-in-one, foreground (make run)
    porpoise cluster start --masters N --workers M --apis K   detached local cluster (make cluster)
    porpoise cluster stop | status                      (make stop; status: every process of it)
    porpoise db init|upgrade|version                    the schema, as its owner (engine/cli/db.py)
    porpoise user create|list|disable|enable|delete|passwd   users (create --admin --dsn: the first admin)
    porpoise token create|list|revoke                   API tokens
    porpoise task-group list|show|create|resize|delete|queue|force-start   task groups
    porpoise alert-group list|show|delete|test|alerts   alert groups, a test alert, the alert history
    porpoise secrets init|encrypt-all|rotate-key|prune-keys   the keyring sealing stored credentials

The API commands find the server and token as engine/cli/client.py describes (``make run`` writes them).

Errors are one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine import __version__, logs
from engine import config as config_mod
from engine.errors import PorpoiseError

if TYPE_CHECKING:
    from engine import cluster
    from engine.infra.stack import Stack


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    config_mod.add_arguments(common)
    parser = argparse.ArgumentParser(prog="porpoise", description="Porpoise workflow scheduler")
    parser.add_argument("--version", action="version", version=f"porpoise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sa = sub.add_parser("standalone", parents=[common], help="run etcd + PostgreSQL + master + worker (foreground)")
    sa.add_argument("--run-dir", default=None, help="data, logs and state (default: standalone.run_dir)")
    sa.add_argument("--example", action="store_true", help="apply and run the example pipeline once started")
    sa.add_argument(
        "--spark",
        type=standalone_spark_modes,
        default=frozenset({"local"}),
        help="Spark for SPARK tasks: local (default), cluster (a standalone Spark cluster on loopback), connect "
        "(a Spark Connect server); combine with commas",
    )
    sa.add_argument("--secure-etcd", action="store_true", help="etcd with client TLS and auth (standalone.secure_etcd)")

    from engine.cli import remote as cli_remote

    cli_remote.add_parsers(sub, common)
    from engine.cli import users as cli_users

    cli_users.add_parsers(sub, common)
    from engine.cli import tenants as cli_tenants

    cli_tenants.add_parsers(sub, common)
    from engine.cli import project_params as cli_project_params

    cli_project_params.add_parsers(sub, common)
    from engine.cli import environments as cli_environments

    cli_environments.add_parsers(sub, common)
    from engine.cli import resources as cli_resources

    cli_resources.add_parsers(sub, common)
    from engine.cli import worker_groups as cli_worker_groups

    cli_worker_groups.add_parsers(sub, common)
    from engine.cli import secrets as cli_secrets

    cli_secrets.add_parsers(sub, common)

    cl = sub.add_parser("cluster", help="live nodes (no action), or a local multi-process cluster")
    cl.add_argument("--api", help="API URL")
    cl.add_argument("--token", help="API token")
    cl.add_argument("--json", action="store_true", help="machine-readable output")
    cl_sub = cl.add_subparsers(dest="action", required=False)
    for action in ("start", "stop", "status"):
        p = cl_sub.add_parser(action, parents=[common])
        p.add_argument("--run-dir", default=".run/cluster")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        if action == "start":
            p.add_argument("--masters", type=int, default=3)
            p.add_argument("--workers", type=int, default=2)
            p.add_argument("--apis", type=int, default=1, help="API servers (the first writes client.json)")

    from engine.cli import db as cli_db

    cli_db.add_parsers(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = config_mod.load(getattr(args, "config", None), getattr(args, "overrides", []))
        logs.configure("console", cfg.logging.level)
        return _dispatch(args, cfg)
    except PorpoiseError as exc:
        print(f"porpoise: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def standalone_spark_modes(text: str) -> frozenset[str]:
    from engine.standalone_spark import parse_modes

    return parse_modes(text)


def _dispatch(args: argparse.Namespace, cfg: config_mod.Config) -> int:
    if args.command == "standalone":
        from engine import standalone

        if args.secure_etcd:
            cfg = cfg.replace(standalone={"secure_etcd": True})
        return standalone.run(cfg, Path(args.run_dir or cfg.standalone.run_dir), example=args.example, spark=args.spark)
    if args.command in ("user", "token"):
        from engine.cli import users as cli_users

        return cli_users.run(args)
    if args.command == "tenant":
        from engine.cli import tenants as cli_tenants

        return cli_tenants.run(args)
    if args.command == "worker-group":
        from engine.cli import worker_groups as cli_worker_groups

        return cli_worker_groups.run(args)
    if args.command == "environment":
        from engine.cli import environments as cli_environments

        return cli_environments.run(args)
    if args.command == "project-param":
        from engine.cli import project_params as cli_project_params

        return cli_project_params.run(args)
    if args.command == "resource":
        from engine.cli import resources as cli_resources

        return cli_resources.run(args)
    if args.command == "secrets":
        from engine.cli import secrets as cli_secrets

        return cli_secrets.run(args, cfg)
    from engine.cli import remote as cli_remote

    # the API commands are exactly those remote.py defines a handler for (one table, no second list to forget)
    if args.command in cli_remote.COMMANDS and (args.command != "cluster" or args.action is None):
        return cli_remote.run(args)
    if args.command == "cluster":
        from engine import cluster

        run_dir = Path(args.run_dir)
        if args.action == "start":
            if args.masters < 1 or args.workers < 0 or args.apis < 0:
                print("porpoise: --masters must be >= 1, --workers and --apis >= 0", file=sys.stderr)
                return 2
            stack = cluster.start(cfg, run_dir, args.masters, args.workers, args.apis)
            _print_processes(cluster.rows_of(stack), args.json)
            if not args.json:
                print(_cluster_usage(stack, run_dir, args.apis > 0))
            return 0
        if args.action == "stop":
            stopped = cluster.stop(cfg, run_dir)
            if args.json:
                print(json.dumps({"stopped": stopped}))
            else:
                print(f"stopped {len(stopped)} process(es)" + (f": {', '.join(stopped)}" if stopped else ""))
            return 0
        rows = cluster.status(cfg, run_dir)
        if not rows and not args.json:
            print(f"no processes recorded in {run_dir} (start a cluster there with make cluster)")
            return 0
        _print_processes(rows, args.json)
        return 0
    if args.command == "db":
        from engine.cli import db as cli_db

        return cli_db.run(args, cfg)
    print(f"porpoise: {args.command}: no handler for this command", file=sys.stderr)
    return 2


def _print_processes(rows: list[cluster.ProcessRow], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_json() for r in rows]))
        return
    print(f"{'NAME':<12} {'ROLE':<9} {'ADDRESS':<22} {'PID':<8} STATE")
    for r in rows:
        print(f"{r.name:<12} {r.role:<9} {r.address:<22} {r.pid:<8} {'up' if r.alive else 'down'}")


def _cluster_usage(stack: Stack, run_dir: Path, with_api: bool) -> str:
    """What to do next with a cluster ``make cluster`` just started."""
    from engine import cluster

    lines = [f"\nlogs in {run_dir / 'logs'}, state in {stack.state_path}"]
    if with_api:
        client = cluster.client_path(run_dir)
        url = json.loads(client.read_text())["api_url"]
        lines += [
            f"API {url} (docs {url}/docs); its URL and an admin token are in {client}",
            "Use it with the porpoise CLI:",
            f"  export PORPOISE_CLIENT_CONFIG={client}",
            "  porpoise cluster                              # masters and workers, as the API sees them",
            "  porpoise apply examples/hello/hello.yaml      # a two-task workflow",
            "  porpoise start hello --watch                  # run it, follow it to its end",
            f"  porpoise cluster status --run-dir {run_dir}   # every process of this cluster",
        ]
    lines.append(f"stop with: make stop  (or porpoise cluster stop --run-dir {run_dir})")
    return "\n".join(lines)
