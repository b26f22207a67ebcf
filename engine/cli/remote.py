"""The ``porpoise`` commands that talk to the API: apply, start, list, status, watch, logs, stop, pause,
resume, recover-failed, rerun, cluster, worker drain / undrain (and, from cli_schedule, schedule,
backfill, force-success).
Human output by default (tables via rich), ``--json`` for scripts."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from engine.cli import alert_groups as cli_alert_groups
from engine.cli import datasources as cli_datasources
from engine.cli import migrate as cli_migrate
from engine.cli import schedule as cli_schedule
from engine.cli import task_groups as cli_task_groups
from engine.client import ApiClient, ApiClientError, connection_parser, discover
from engine.workflows import document
from engine.workflows.model import DefinitionError

FINAL_OK = "SUCCESS"
_STYLE = {
    "SUCCESS": "green",
    "FORCED_SUCCESS": "green",
    "FAILURE": "red",
    "KILL": "red",
    "STOP": "yellow",
    "PAUSE": "yellow",
    "NEED_FAULT_TOLERANCE": "magenta",
    "RUNNING_EXECUTION": "cyan",
    "DISPATCH": "blue",
    "DISABLED": "dim",
}
#: how a state reads in a table where its name is not the clearest word
_LABEL = {"DISABLED": "disabled"}
#: task states that count as done in the progress line (a disabled task is passed through as a success)
_DONE = ("SUCCESS", "FORCED_SUCCESS", "DISABLED")
#: how long ``start`` waits for a master to turn the command into an instance
CLAIM_WAIT_SECONDS = 30.0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)

    p = sub.add_parser(
        "apply", parents=[conn], help="create or update workflows from a YAML file or a Python file (SDK)"
    )
    p.add_argument("file")
    p.add_argument("--offline", action="store_true", help="save without putting the workflows online")

    p = sub.add_parser("start", parents=[conn], help="start a workflow")
    p.add_argument("name", help="workflow name (or code)")
    p.add_argument("--project", help="project, when the name exists in several")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="override a global param")
    p.add_argument("--priority", choices=["HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST"])
    p.add_argument("--worker-group")
    p.add_argument("--failure-strategy", choices=["END", "CONTINUE"])
    p.add_argument("--watch", action="store_true", help="follow the run to its end (exit code = result)")
    p.add_argument("--from-task", action="append", default=[], metavar="TASK", help="start from this task (repeatable)")
    p.add_argument(
        "--scope",
        choices=["TASK_ONLY", "TASK_PRE", "TASK_POST"],
        help="with --from-task: just those tasks, with their upstream, or with their downstream (default)",
    )

    p = sub.add_parser("list", parents=[conn], help="list workflow instances (or --workflows)")
    p.add_argument("--workflows", action="store_true", help="list workflow definitions instead")
    p.add_argument("--state", help="comma list of states, e.g. RUNNING_EXECUTION,FAILURE")
    p.add_argument("--workflow", help="workflow name or code")
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=20)

    for name, text in (("status", "a workflow instance and its tasks"), ("watch", "follow an instance to its end")):
        p = sub.add_parser(name, parents=[conn], help=text)
        p.add_argument("id", type=int)
        if name == "watch":
            p.add_argument("--interval", type=float, default=0.5, help="seconds between refreshes")

    p = sub.add_parser("logs", parents=[conn], help="a task instance's log")
    p.add_argument("task_id", type=int)
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the task ends")

    for action, text in (
        ("stop", "stop a workflow instance (kill its running tasks)"),
        ("pause", "pause a workflow instance (running tasks finish)"),
        ("resume", "resume a paused or stopped workflow instance"),
        ("recover-failed", "run a failed workflow instance again from its failed tasks"),
        ("rerun", "run a finished workflow instance again from scratch"),
    ):
        p = sub.add_parser(action, parents=[conn], help=text)
        p.add_argument("id", type=int)

    p = sub.add_parser("worker", help="act on a worker")
    w_sub = p.add_subparsers(dest="action", required=True)
    for action, text in (
        ("drain", "take no new tasks on this worker (its running tasks finish; it stays up)"),
        ("undrain", "let a drained worker take tasks again"),
    ):
        w = w_sub.add_parser(action, parents=[conn], help=text)
        w.add_argument("host", help="the worker's address, host:port (as `porpoise cluster` shows it)")
    cli_schedule.add_parsers(sub, conn)
    cli_migrate.add_parsers(sub, conn)
    cli_task_groups.add_parsers(sub, conn)
    cli_alert_groups.add_parsers(sub, conn)
    cli_datasources.add_parsers(sub, conn)


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, getattr(args, "ca_file", None)))
    # piped output (scripts, CI logs) is not squeezed to 80 columns
    out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    handler: Callable[[ApiClient, argparse.Namespace, Console], int] = COMMANDS[args.command]
    try:
        return handler(client, args, out)
    except DefinitionError as exc:
        print(f"porpoise: {exc.field}: {exc.reason}", file=sys.stderr)
        return 1


def _emit(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# -- definitions ----------------------------------------------------------------------------------


def cmd_apply(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    if args.file.endswith(".py"):
        return _apply_python(client, args, out)
    docs = document.read_documents(args.file)
    for i, doc in enumerate(docs):  # the same checks the API runs, before anything is sent
        try:
            document.parse(doc)
        except DefinitionError as exc:
            where = f"workflow[{i}]." if len(docs) > 1 else ""
            raise DefinitionError(f"{args.file}: {where}{exc.field}", exc.reason) from exc
    results = []
    for doc in docs:
        saved = client.post("/api/v1/workflows", doc, release=not args.offline)
        results.append({"name": doc["name"], "project": doc["project"], **saved})
    return _report_applied(results, args, out)


def _apply_python(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    """Apply every Workflow a Python file defines (the SDK's own apply: schedules included)."""
    from porpoise import Client, WorkflowError, load_workflows

    try:
        workflows = load_workflows(args.file)
        for wf in workflows:  # every check before anything is sent
            wf.validate()
    except WorkflowError as exc:
        raise DefinitionError(f"{args.file}: {exc.field}", exc.reason) from exc
    sdk = Client(api=client)
    results = []
    for wf in workflows:
        wf.apply(sdk, online=not args.offline)
        results.append({"name": wf.name, "project": wf.project, **wf.saved})
    return _report_applied(results, args, out)


def _report_applied(results: list[dict[str, Any]], args: argparse.Namespace, out: Console) -> int:
    if args.json:
        _emit(results)
        return 0
    for r in results:
        verb = "created" if r["created"] else "updated"
        state = "offline" if args.offline else "online"
        out.print(
            f"workflow [bold]{r['project']}/{r['name']}[/] {verb}: code {r['code']}, version {r['version']}, {state}"
        )
        if r.get("warning"):
            out.print(f"[yellow]warning[/]: {r['warning']}")
    return 0


def _workflow_code(client: ApiClient, name: str, project: str | None) -> int:
    if name.isdigit():
        return int(name)
    found = client.get("/api/v1/workflows", name=name, project=project)["items"]
    if not found:
        raise ApiClientError(f"no workflow named {name!r}" + (f" in project {project!r}" if project else ""))
    if len(found) > 1:
        projects = ", ".join(w["project"] for w in found)
        raise ApiClientError(f"workflow {name!r} exists in several projects ({projects}); pass --project")
    return int(found[0]["code"])


def _params(items: list[str]) -> dict[str, str]:
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ApiClientError(f"--param {item!r}: expected NAME=VALUE")
        params[name] = value
    return params


def cmd_start(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    code = _workflow_code(client, args.name, args.project)
    body: dict[str, Any] = {"params": _params(args.param)}
    for key in ("priority", "worker_group", "failure_strategy", "scope"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.from_task:
        body["start_tasks"] = args.from_task
    command = client.post(f"/api/v1/workflows/{code}/start", body)
    deadline = time.monotonic() + CLAIM_WAIT_SECONDS
    status = command
    while status["status"] == "QUEUED" and time.monotonic() < deadline:
        time.sleep(0.05)
        status = client.get(f"/api/v1/commands/{command['command_id']}")
    if status["status"] == "ERROR":
        raise ApiClientError(f"command {command['command_id']} was refused: {status['message']}")
    if status["status"] == "QUEUED":
        raise ApiClientError(
            f"command {command['command_id']} is still queued after {CLAIM_WAIT_SECONDS:.0f}s: is a master running? "
            "(`porpoise cluster`)"
        )
    instance_id = status["workflow_instance_id"]
    if args.watch:
        if not args.json:
            out.print(f"started workflow instance [bold]{instance_id}[/]")
        return _watch(client, instance_id, 0.5, args, out)
    if args.json:
        _emit(status)
    else:
        out.print(f"started workflow instance [bold]{instance_id}[/] (follow it: porpoise watch {instance_id})")
    return 0


# -- instances ------------------------------------------------------------------------------------


def _when(value: str | None) -> str:
    return (value or "")[:19].replace("T", " ")


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _state(name: str) -> str:
    style, label = _STYLE.get(name), _LABEL.get(name, name)
    return f"[{style}]{label}[/]" if style else label


def cmd_list(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    if args.workflows:
        data = client.get("/api/v1/workflows", project=args.project, size=args.limit)
        if args.json:
            _emit(data)
            return 0
        table = Table("code", "project", "name", "version", "state", "updated")
        for w in data["items"]:
            table.add_row(str(w["code"]), w["project"], w["name"], str(w["version"]), w["release_state"],
                          _when(w["update_time"]))  # fmt: skip
        out.print(table)
        return 0
    query: dict[str, Any] = {"state": args.state, "project": args.project, "size": args.limit}
    if args.workflow:
        query["workflow"] = _workflow_code(client, args.workflow, args.project)
    data = client.get("/api/v1/instances", **query)
    if args.json:
        _emit(data)
        return 0
    table = Table("id", "name", "state", "started", "duration", "master")
    for i in data["items"]:
        table.add_row(str(i["id"]), i["name"], _state(i["state"]), _when(i["start_time"]), _duration(i["duration_ms"]),
                      i["host"] or "")  # fmt: skip
    out.print(table)
    out.print(f"{len(data['items'])} of {data['total']} instance(s)")
    return 0


def _task_state(t: dict[str, Any]) -> str:
    """A task's state, and its place in its task group's queue while it waits there."""
    waiting = (t.get("task_group") or {}).get("waiting")
    return f"{_state(t['state'])} ({waiting})" if waiting else _state(t["state"])


def _task_table(detail: dict[str, Any]) -> Table:
    table = Table("task", "id", "type", "state", "attempt", "worker", "queued", "ran")
    for t in detail["tasks"]:
        table.add_row(t["name"], str(t["id"] or "-"), t["type"], _task_state(t), str(t["attempt"]), t["host"] or "",
                      _duration(t["queued_ms"]), _duration(t["duration_ms"]))  # fmt: skip
    return table


def _header(detail: dict[str, Any]) -> str:
    return (
        f"instance [bold]{detail['id']}[/] {detail['name']}  {_state(detail['state'])}  "
        f"started {_when(detail['start_time'])}  {_duration(detail['duration_ms'])}  master {detail['host'] or '-'}"
    )


def cmd_status(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    detail = client.get(f"/api/v1/instances/{args.id}")
    if args.json:
        _emit(detail)
        return 0
    out.print(_header(detail))
    out.print(_task_table(detail))
    return 0


def _progress(detail: dict[str, Any]) -> tuple[int, int]:
    done = sum(1 for t in detail["tasks"] if t["state"] in _DONE)
    return done, max(int(detail["tasks_total"]), 1)


def _watch(client: ApiClient, instance_id: int, interval: float, args: argparse.Namespace, out: Console) -> int:
    """Follow an instance until it finishes. On a terminal: a live progress bar and task table; else one
    line per task state change. Exit code 0 only when the instance ends SUCCESS."""
    detail = client.get(f"/api/v1/instances/{instance_id}")
    seen: dict[tuple[int, str], str] = {}

    def render(d: dict[str, Any]) -> Table:
        done, total = _progress(d)
        grid = Table.grid(padding=(0, 1))
        grid.add_row(_header(d))
        grid.add_row(ProgressBar(total=total, completed=done, width=50))
        grid.add_row(f"{done}/{total} tasks succeeded")
        grid.add_row(_task_table(d))
        return grid

    def changes(d: dict[str, Any]) -> None:
        for t in d["tasks"]:
            key = (t["id"], t["state"])
            if key not in seen:
                seen[key] = t["state"]
                out.print(f"{_when(time.strftime('%Y-%m-%dT%H:%M:%S'))}  {t['name']:<24} {_state(t['state'])}"
                          f"  attempt {t['attempt']}  {t['host'] or ''}")  # fmt: skip

    live = out.is_terminal and not args.json
    if live:
        with Live(render(detail), console=out, refresh_per_second=8) as view:
            while not detail["finished"]:
                time.sleep(interval)
                detail = client.get(f"/api/v1/instances/{instance_id}")
                view.update(render(detail))
    else:
        while True:
            if not args.json:
                changes(detail)
            if detail["finished"]:
                break
            time.sleep(interval)
            detail = client.get(f"/api/v1/instances/{instance_id}")
    if args.json:
        _emit(detail)
    else:
        done, total = _progress(detail)
        out.print(f"instance {instance_id} finished {_state(detail['state'])} in {_duration(detail['duration_ms'])}"
                  f" ({done}/{total} tasks succeeded)")  # fmt: skip
    return 0 if detail["state"] == FINAL_OK else 1


def cmd_watch(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    return _watch(client, args.id, args.interval, args, out)


def cmd_logs(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    skip = 0
    while True:
        page = client.get(f"/api/v1/tasks/{args.task_id}/log", skip=skip, limit=1000)
        for line in page["lines"]:
            print(line, flush=False)
        sys.stdout.flush()
        skip = page["next"]
        if page["lines"]:
            continue  # there may be more right away
        if page["complete"] or not args.follow:
            return 0
        time.sleep(0.3)


def cmd_control(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    reply = client.post(f"/api/v1/instances/{args.id}/{args.command}")
    if args.json:
        _emit(reply)
    elif args.command in ("resume", "recover-failed", "rerun"):
        out.print(f"{args.command} of instance {args.id} queued (command {reply['command_id']})")
    else:
        out.print(f"{args.command} of instance {args.id} accepted")
    return 0


def cmd_cluster(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    data = client.get("/api/v1/cluster")
    if args.json:
        _emit(data)
        return 0
    table = Table("role", "address", "group", "status", "cpu", "memory", "load", "tasks", "up since")
    for role, nodes in (("master", data["masters"]), ("worker", data["workers"])):
        for n in nodes:
            hb = n["heartbeat"]
            tasks = f"{hb['running_tasks']} running, {hb['waiting_tasks']} waiting" if role == "worker" else ""
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(hb["startup_time"] / 1000))
            status = f"{n['status']}: {n['reason']}" if n.get("reason") else n["status"]
            table.add_row(role, n["address"], n["group"] or "", status, f"{hb['cpu_usage']:.0%}",
                          f"{hb['memory_usage']:.0%}", f"{hb['load_average']:.2f}", tasks, since)  # fmt: skip
    out.print(table)
    return 0


def cmd_worker(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    path = f"/api/v1/cluster/workers/{urllib.parse.quote(args.host, safe=':')}/drain"
    reply = client.post(path) if args.action == "drain" else client.delete(path)
    if args.json:
        _emit(reply)
    elif reply["draining"]:
        out.print(f"worker {reply['address']} is draining: it takes no new tasks; "
                  f"{reply['running']} still running, {reply['pending_reports']} report(s) to deliver")  # fmt: skip
    else:
        out.print(f"worker {reply['address']} takes tasks again")
    return 0


#: every API command of the CLI and its handler; engine/cli/main.py dispatches on these keys
COMMANDS: dict[str, Callable[[ApiClient, argparse.Namespace, Console], int]] = {
    "apply": cmd_apply,
    "start": cmd_start,
    "list": cmd_list,
    "status": cmd_status,
    "watch": cmd_watch,
    "logs": cmd_logs,
    "stop": cmd_control,
    "pause": cmd_control,
    "resume": cmd_control,
    "recover-failed": cmd_control,
    "rerun": cmd_control,
    "cluster": cmd_cluster,
    "worker": cmd_worker,
    "schedule": lambda c, a, o: cli_schedule.cmd_schedule(c, a, o, _workflow_code),
    "backfill": lambda c, a, o: cli_schedule.cmd_backfill(c, a, o, _workflow_code, _params),
    "force-success": cli_schedule.cmd_force_success,
    "import": cli_migrate.cmd_import,
    "export": cli_migrate.cmd_export,
    "task-group": cli_task_groups.cmd_task_group,
    "alert-group": cli_alert_groups.cmd_alert_group,
    "datasource": cli_datasources.cmd_datasource,
}
