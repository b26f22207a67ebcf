"""The ``porpoise`` commands for scheduling: ``schedule`` (cron schedules and their next fire times),
``backfill`` (COMPLEMENT_DATA runs over past dates) and ``force-success``. Like the other remote
commands they talk to the API; ``--json`` prints what the API answered."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.client import ApiClient, ApiClientError

PRIORITIES = ["HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST"]


def add_parsers(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser("schedule", parents=[conn], help="cron schedules of workflows")
    p.add_argument("action", choices=["list", "show", "create", "update", "delete", "online", "offline", "preview"])
    p.add_argument("target", nargs="?", help="schedule id (show/update/delete/online/offline), workflow (create)")
    p.add_argument("--project", help="project of the workflow, when its name exists in several")
    p.add_argument("--cron", help="5-field cron or Quartz style with seconds, e.g. '0 0 2 * * ?'")
    p.add_argument("--timezone", help="IANA zone (default UTC)")
    p.add_argument("--start-time", help="ISO 8601: first possible fire")
    p.add_argument("--end-time", help="ISO 8601: last possible fire")
    p.add_argument("--misfire", choices=["fire_all", "skip"], help="after downtime: fire missed times or skip them")
    p.add_argument("--failure-strategy", choices=["END", "CONTINUE"])
    p.add_argument("--priority", choices=PRIORITIES)
    p.add_argument("--worker-group")
    p.add_argument("--online", action="store_true", help="create: put it online at once")
    p.add_argument("--count", type=int, default=5, help="how many next fire times to show")

    p = sub.add_parser("backfill", parents=[conn], help="run a workflow for past dates (COMPLEMENT_DATA)")
    p.add_argument("name", help="workflow name (or code)")
    p.add_argument("--project")
    p.add_argument("--start", help="range start, ISO 8601 (dates = the workflow's schedule fire times, or daily)")
    p.add_argument("--end", help="range end, ISO 8601 (inclusive)")
    p.add_argument("--date", action="append", default=[], help="an explicit date (repeatable) instead of a range")
    p.add_argument("--parallel", type=int, metavar="N", help="run N chains at once (default: one serial chain)")
    p.add_argument("--reverse", action="store_true", help="newest date first")
    p.add_argument("--continue-on-failure", action="store_true", help="a chain goes on after a failed date")
    p.add_argument("--all-dependent", action="store_true",
                   help="also backfill the workflows whose DEPENDENT tasks wait on it, upstream first")  # fmt: skip
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")

    p = sub.add_parser("force-success", parents=[conn], help="force a failed task instance to success")
    p.add_argument("task_id", type=int)


def _schedule_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, arg in (
        ("crontab", "cron"),
        ("timezone", "timezone"),
        ("start_time", "start_time"),
        ("end_time", "end_time"),
        ("misfire_policy", "misfire"),
        ("failure_strategy", "failure_strategy"),
        ("priority", "priority"),
        ("worker_group", "worker_group"),
    ):
        if getattr(args, arg):
            body[key] = getattr(args, arg)
    return body


def _need_target(args: argparse.Namespace, what: str) -> str:
    if not args.target:
        raise ApiClientError(f"schedule {args.action} needs {what}")
    return str(args.target)


def _print_schedules(items: list[dict[str, Any]], out: Console) -> None:
    table = Table("id", "workflow", "cron", "zone", "state", "misfire", "next fire")
    for s in items:
        upcoming = s["next_fire_times"][0][:19].replace("T", " ") if s["next_fire_times"] else "-"
        table.add_row(str(s["id"]), str(s["workflow_code"]), s["crontab"], s["timezone"], s["release_state"],
                      s["misfire_policy"], upcoming)  # fmt: skip
    out.print(table)


def cmd_schedule(client: ApiClient, args: argparse.Namespace, out: Console, workflow_code: Any) -> int:
    action = args.action
    if action == "list":
        query = {"workflow": workflow_code(client, args.target, args.project)} if args.target else {}
        reply = client.get("/api/v1/schedules", **query)
        if not args.json:
            _print_schedules(reply["items"], out)
    elif action == "preview":
        if not args.cron:
            raise ApiClientError("schedule preview needs --cron")
        body = {"crontab": args.cron, "timezone": args.timezone or "UTC", "count": args.count}
        reply = client.post("/api/v1/schedules/preview", body)
    elif action == "create":
        code = workflow_code(client, _need_target(args, "a workflow"), args.project)
        if not args.cron:
            raise ApiClientError("schedule create needs --cron")
        reply = client.post("/api/v1/schedules", {"workflow_code": code, **_schedule_body(args), "online": args.online})
    elif action == "show":
        reply = client.get(f"/api/v1/schedules/{_need_target(args, 'an id')}", count=args.count)
    elif action == "update":
        reply = client.put(f"/api/v1/schedules/{_need_target(args, 'an id')}", _schedule_body(args))
    elif action == "delete":
        reply = client.delete(f"/api/v1/schedules/{_need_target(args, 'an id')}")
    else:
        reply = client.post(f"/api/v1/schedules/{_need_target(args, 'an id')}/{action}")
    if args.json:
        print(json.dumps(reply, indent=2, default=str))
    elif action == "delete":
        out.print(f"schedule {reply['deleted']} deleted")
    elif action != "list":
        if "id" in reply:
            out.print(f"schedule {reply['id']}: {reply['crontab']} ({reply['timezone']}) {reply['release_state']}")
        for when in reply["next_fire_times"]:
            out.print(f"  next: {when}")
    return 0


def cmd_backfill(client: ApiClient, args: argparse.Namespace, out: Console, workflow_code: Any, params: Any) -> int:
    code = workflow_code(client, args.name, args.project)
    body: dict[str, Any] = {"params": params(args.param), "reverse": args.reverse}
    if args.date:
        body["dates"] = args.date
    for key in ("start", "end"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.parallel:
        body["run_mode"], body["parallelism"] = "PARALLEL", args.parallel
    if args.continue_on_failure:
        body["on_failure"] = "CONTINUE"
    if args.all_dependent:
        body["dependent_mode"] = "ALL_DEPENDENT"
    reply = client.post(f"/api/v1/workflows/{code}/backfill", body)
    if args.json:
        print(json.dumps(reply, indent=2))
    else:
        out.print(f"backfill of {reply['dates']} date(s) queued as {reply['chains']} chain(s): "
                  f"commands {', '.join(map(str, reply['command_ids']))}")  # fmt: skip
        for d in reply.get("dependents", []):
            what = f"skipped ({d['skipped']})" if d["skipped"] else f"commands {', '.join(map(str, d['command_ids']))}"
            out.print(f"  downstream {d['project']}/{d['name']}: {what}")
        if reply.get("skipped_not_permitted"):
            out.print(f"  {reply['skipped_not_permitted']} downstream workflow(s) you may not start: skipped")
    return 0


def cmd_force_success(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    reply = client.post(f"/api/v1/tasks/{args.task_id}/force-success")
    if args.json:
        print(json.dumps(reply))
    else:
        out.print(f"task instance {reply['id']} is {reply['state']}; `porpoise recover-failed` continues the run")
    return 0
