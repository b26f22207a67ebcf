"""``porpoise import dolphinscheduler FILE`` and ``porpoise export NAME --format dolphinscheduler``:
moving workflows from and to DolphinScheduler through the API (engine/api/migrate.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from engine.client import ApiClient, ApiClientError

#: an import of a large export may take a while: each workflow is saved in one transaction
IMPORT_TIMEOUT_SECONDS = 120.0


def add_parsers(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser("import", parents=[conn], help="create workflows from another scheduler's export")
    p.add_argument("format", choices=["dolphinscheduler"])
    p.add_argument("file", help="the JSON that DolphinScheduler 3.0 - 3.2 'export' writes")
    p.add_argument("--project", help="project to create them in (default: the export's project, else default)")
    skip = "import the rest when tasks are unsupported (they become failing placeholders, marked)"
    p.add_argument("--skip-unsupported", action="store_true", help=skip)
    mapped = "use Porpoise data source NAME for DolphinScheduler data source ID (repeatable)"
    p.add_argument("--datasource", action="append", default=[], metavar="ID=NAME", help=mapped)
    p.add_argument("--online", action="store_true", help="put the imported workflows online (schedules stay offline)")

    p = sub.add_parser("export", parents=[conn], help="write workflows in another scheduler's format")
    p.add_argument("name", nargs="*", help="workflow names (default: every workflow of the project)")
    p.add_argument("--format", choices=["dolphinscheduler"], required=True)
    p.add_argument("--project", required=True)
    p.add_argument("-o", "--output", help="file to write (default: standard output)")


def _mapping(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        ident, sep, name = item.partition("=")
        if not sep or not ident or not name:
            raise ApiClientError(f"--datasource {item!r}: expected ID=NAME")
        out[ident] = name
    return out


def cmd_import(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    try:
        data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ApiClientError(f"cannot read {args.file}: {exc.strerror}") from None
    except ValueError as exc:
        raise ApiClientError(f"{args.file} is not JSON: {exc}") from None
    body: dict[str, Any] = {"export": data, "skip_unsupported": args.skip_unsupported, "release": args.online}
    if args.project:
        body["project"] = args.project
    if args.datasource:
        body["datasources"] = _mapping(args.datasource)
    client.timeout = max(client.timeout, IMPORT_TIMEOUT_SECONDS)
    try:
        result = client.post("/api/v1/import/dolphinscheduler", body)
    except ApiClientError as exc:
        for d in exc.details:
            where = "/".join(str(d[k]) for k in ("workflow", "task") if d.get(k)) or d.get("datasource", "")
            print(f"  {where}: {d.get('detail') or ', '.join(d.get('tasks', []))}", file=sys.stderr)
        raise
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for w in result["workflows"]:
        schedule = f", schedule {w['schedule_id']} (offline)" if w["schedule_id"] else ""
        out.print(f"workflow [bold]{result['project']}/{w['name']}[/] created: code {w['code']}{schedule}")
    for g in result["gaps"]:
        where = "/".join(x for x in (g["workflow"], g["task"]) if x)
        out.print(f"  [yellow]{g['kind']}[/] {where}: {g['detail']}")
    return 0


def cmd_export(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    body: dict[str, Any] = {"project": args.project}
    if args.name:
        body["workflows"] = args.name
    result = client.post("/api/v1/export/dolphinscheduler", body)
    text = json.dumps(result, ensure_ascii=False)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        if not args.json:
            out.print(f"{len(result)} workflow(s) written to {args.output}")
    else:
        print(text)
    return 0
