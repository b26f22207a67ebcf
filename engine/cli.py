"""The ``porpoise`` command line.

    porpoise apply FILE                                 create / update workflows from a YAML file
    porpoise start NAME [--param k=v ...] [--watch]     start a workflow
    porpoise list [--workflows] [--state S]             recent instances (or definitions)
    porpoise status ID | watch ID                       an instance and its tasks (watch: live, to the end)
    porpoise logs TASK_ID [--follow]                    a task's log
    porpoise stop | pause | resume ID                   control an instance
    porpoise cluster                                    live masters and workers
    porpoise worker drain|undrain HOST                  a worker takes no new tasks (running ones finish)
    porpoise standalone [--run-dir DIR] [--example]     all-in-one, foreground (make run)
    porpoise cluster start --masters N --workers M      detached local cluster (make cluster)
    porpoise cluster stop | status                      (make stop)
    porpoise db init                                    apply schema.sql to the configured database
    porpoise user create|list|disable|enable|delete|passwd   users (create --admin --dsn: the first admin)
    porpoise token create|list|revoke                   API tokens
    porpoise secrets init|encrypt-all|rotate-key|prune-keys   the keyring sealing stored credentials

The API commands find the server and token as engine/client.py describes (``make run`` writes them).

Errors are one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from engine import __version__, logs
from engine import config as config_mod
from engine.errors import PorpoiseError

REMOTE = {
    "apply", "start", "list", "status", "watch", "logs", "stop", "pause", "resume", "recover-failed", "rerun",
    "schedule", "backfill", "force-success", "import", "export", "worker",
}  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="YAML file with configuration sections")
    common.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a key",
    )
    parser = argparse.ArgumentParser(prog="porpoise", description="Porpoise workflow scheduler")
    parser.add_argument("--version", action="version", version=f"porpoise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sa = sub.add_parser("standalone", parents=[common], help="run etcd + PostgreSQL + master + worker (foreground)")
    sa.add_argument("--run-dir", default=None, help="data, logs and state (default: standalone.run_dir)")
    sa.add_argument("--example", action="store_true", help="apply and run the example pipeline once started")
    sa.add_argument("--secure-etcd", action="store_true", help="etcd with client TLS and auth (standalone.secure_etcd)")

    from engine import cli_remote

    cli_remote.add_parsers(sub, common)
    from engine import cli_users

    cli_users.add_parsers(sub, common)
    from engine import cli_secrets

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

    db = sub.add_parser("db", help="metadata database")
    db_sub = db.add_subparsers(dest="action", required=True)
    init = db_sub.add_parser("init", parents=[common], help="apply schema.sql (idempotent)")
    init.add_argument("--dsn", help="PostgreSQL DSN (default: the database.* configuration)")
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


def _dispatch(args: argparse.Namespace, cfg: config_mod.Config) -> int:
    if args.command == "standalone":
        from engine import standalone

        if args.secure_etcd:
            cfg = cfg.replace(standalone={"secure_etcd": True})
        return standalone.run(cfg, Path(args.run_dir or cfg.standalone.run_dir), example=args.example)
    if args.command in ("user", "token"):
        from engine import cli_users

        return cli_users.run(args)
    if args.command == "secrets":
        from engine import cli_secrets

        return cli_secrets.run(args, cfg)
    if args.command in REMOTE or (args.command == "cluster" and args.action is None):
        from engine import cli_remote

        return cli_remote.run(args)
    if args.command == "cluster":
        from engine import cluster

        run_dir = Path(args.run_dir)
        if args.action == "start":
            if args.masters < 1 or args.workers < 0:
                print("porpoise: --masters must be >= 1 and --workers >= 0", file=sys.stderr)
                return 2
            stack = cluster.start(cfg, run_dir, args.masters, args.workers)
            rows = [(r.name, r.pid, True) for r in stack.records()]
            _print_processes(rows, args.json)
            if not args.json:
                print(f"etcd {stack.etcd.endpoint if stack.etcd else '?'}; logs in {run_dir / 'logs'}")
                print(f"stop with: porpoise cluster stop --run-dir {run_dir}  (or make stop)")
            return 0
        if args.action == "stop":
            stopped = cluster.stop(cfg, run_dir)
            if args.json:
                print(json.dumps({"stopped": stopped}))
            else:
                print(f"stopped {len(stopped)} process(es)" + (f": {', '.join(stopped)}" if stopped else ""))
            return 0
        _print_processes(cluster.status(cfg, run_dir), args.json)
        return 0
    if args.command == "db" and args.action == "init":
        from engine.storage.schema import apply_schema

        version = asyncio.run(apply_schema(args.dsn or cfg.database.url(), cfg.database.connect_timeout))
        print(f"schema version {version} applied")
        return 0
    raise AssertionError(args)  # pragma: no cover - argparse enforces the choices


def _print_processes(rows: list[tuple[str, int, bool]], as_json: bool) -> None:
    if as_json:
        print(json.dumps([{"name": n, "pid": p, "alive": a} for n, p, a in rows]))
        return
    for name, pid, alive in rows:
        print(f"{name:<12} pid {pid:<8} {'running' if alive else 'stopped'}")
