"""``porpoise resource``: a project's resource center, through the API (docs/RESOURCES.md).

porpoise resource upload PROJECT FILE [--path etl/clean.py]   a new version (default path: the file's name)
porpoise resource list PROJECT [FOLDER]                        a folder's sub-folders and files
porpoise resource download PROJECT PATH [-o FILE] [--version N]
porpoise resource versions PROJECT PATH
porpoise resource delete PROJECT PATH                          every version; refused while workflows use it
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from engine.cli.client import ApiClient, ApiClientError, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    res = sub.add_parser("resource", help="resource center: versioned files tasks use (scripts, jars, modules)")
    actions = res.add_subparsers(dest="action", required=True)
    p = actions.add_parser("upload", parents=[conn], help="upload a file as a new version of its path")
    p.add_argument("project")
    p.add_argument("file", help="the local file")
    p.add_argument("--path", help="its path in the resource center (default: the file's name)")
    p.add_argument("--description", help="a note kept with the version")
    p = actions.add_parser("list", parents=[conn], help="a folder's sub-folders and files")
    p.add_argument("project")
    p.add_argument("folder", nargs="?", default="", help="default: the top")
    p = actions.add_parser("download", parents=[conn], help="download a file (the newest version or --version)")
    p.add_argument("project")
    p.add_argument("path")
    p.add_argument(
        "-o", "--output", help="where to write it (default: its name in the current directory; - for stdout)"
    )
    p.add_argument("--version", type=int, help="a version number")
    p = actions.add_parser("versions", parents=[conn], help="a file's versions, newest first")
    p.add_argument("project")
    p.add_argument("path")
    p = actions.add_parser("delete", parents=[conn], help="delete a file (every version) or a folder")
    p.add_argument("project")
    p.add_argument("path")


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def _version_line(v: dict[str, Any]) -> str:
    restored = f"  (restored from {v['restored_from']})" if v.get("restored_from") else ""
    return f"v{v['version']:<4} {v['size']:>12}  {v['sha256'][:12]}  {v['create_time']}{restored}"


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, args.ca_file), timeout=300.0)
    base = f"/api/v1/projects/{quote(args.project, safe='')}/resources"
    if args.action == "upload":
        local = Path(args.file)
        try:
            size = local.stat().st_size
            source = local.open("rb")
        except OSError as exc:
            raise ApiClientError(f"cannot read {local}: {exc.strerror or exc}") from None
        with source:
            path = args.path or local.name
            answer = client.upload(base, source, size, {"path": path, "description": args.description})
        _show(answer, args, f"uploaded {answer['path']} version {answer['version']} ({answer['size']} bytes)")
    elif args.action == "list":
        data = client.get(base, folder=args.folder or None)
        lines = [f"{f['path']}/  ({f['files']} files, {f['size']} bytes)" for f in data["folders"]]
        lines += [f"{f['path']}  v{f['version']}  {f['size']} bytes" for f in data["files"]]
        empty = f"no resources in {args.folder or 'project ' + args.project}"
        _show(data, args, "\n".join(lines) or empty)
    elif args.action == "download":
        target = args.output or args.path.rsplit("/", 1)[-1]
        query = {"path": args.path, "version": args.version}
        if target == "-":
            client.download(f"{base}/content", sys.stdout.buffer, query)
            return 0
        partial = Path(f"{target}.part")
        try:
            with partial.open("wb") as sink:
                headers = client.download(f"{base}/content", sink, query)
            os.replace(partial, target)
        except OSError as exc:
            raise ApiClientError(f"cannot write {target}: {exc.strerror or exc}") from None
        finally:
            partial.unlink(missing_ok=True)
        version = headers.get("X-Resource-Version", "?")
        _show({"path": args.path, "version": version, "file": target}, args, f"wrote {target} ({args.path} v{version})")
    elif args.action == "versions":
        data = client.request("GET", f"{base}/versions", query={"path": args.path})
        _show(data, args, "\n".join(_version_line(v) for v in data["versions"]))
    else:
        answer = client.request("DELETE", base, query={"path": args.path})
        _show(answer, args, f"deleted {', '.join(answer['deleted'])} ({answer['versions']} versions)")
    return 0
