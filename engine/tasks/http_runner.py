"""Runs one HTTP task (see engine.tasks.http). usage: python -m engine.tasks.http_runner job.json

Exit 0 when the status is expected and the check holds; 1 otherwise (the log says why).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from core.errors import PorpoiseError
from engine.tasks.http import SECRET_HEADER, parse_json_path

MASK = "***"


class CheckFailed(PorpoiseError):
    pass


def _url(base: str, query: dict[str, str]) -> str:
    if not query:
        return base
    parts = urllib.parse.urlsplit(base)
    joined = "&".join(x for x in (parts.query, urllib.parse.urlencode(query)) if x)
    return urllib.parse.urlunsplit(parts._replace(query=joined))


def _body(job: dict[str, Any], headers: dict[str, str]) -> bytes | None:
    body = job["body"]
    if body is None:
        return None
    names = {k.lower() for k in headers}
    if job["body_type"] == "form":
        if "content-type" not in names:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        return urllib.parse.urlencode({k: str(v) for k, v in body.items()}).encode()
    if job["body_type"] == "json":
        if "content-type" not in names:
            headers["Content-Type"] = "application/json"
        return json.dumps(body).encode()
    return str(body).encode()


def select(document: Any, path: str) -> Any:
    """The value at ``path`` in ``document``; CheckFailed when it is not there."""
    value = document
    for step in parse_json_path(path):
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise CheckFailed(f"{path}: nothing at {step!r}") from None
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return "" if value is None else str(value)


def verdict(job: dict[str, Any], status: int, body: bytes) -> dict[str, str]:
    """Check the answer; return the OUT values to set. Raises CheckFailed with the reason."""
    expected = job["expected"]
    if (status not in expected) if expected else not 200 <= status < 300:
        want = ", ".join(map(str, expected)) if expected else "2xx"
        raise CheckFailed(f"status {status} is not the expected {want}")
    text = body.decode(errors="replace")
    parsed: Any = None
    needs_json = job["extract"] or "json_path" in job["check"]
    if needs_json:
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise CheckFailed(f"the answer is not JSON ({exc}), so json_path / extract cannot apply") from None
    check = job["check"]
    if "contains" in check and check["contains"] not in text:
        raise CheckFailed(f"the answer does not contain {check['contains']!r}")
    if "not_contains" in check and check["not_contains"] in text:
        raise CheckFailed(f"the answer contains {check['not_contains']!r}")
    if "json_path" in check:
        found = _text(select(parsed, check["json_path"]))
        if found != _text(check["equals"]):
            raise CheckFailed(f"{check['json_path']} is {found!r}, expected {_text(check['equals'])!r}")
    return {name: _text(select(parsed, path)) for name, path in job["extract"].items()}


def run(job: dict[str, Any], headers: dict[str, str]) -> int:
    url = _url(job["url"], job["query"])
    data = _body(job, headers)
    shown = {k: (MASK if SECRET_HEADER.search(k) else v) for k, v in headers.items()}
    print(f"{job['method']} {url}", flush=True)
    for k, v in sorted(shown.items()):
        print(f"  {k}: {v}", flush=True)
    request = urllib.request.Request(url, data=data, method=job["method"], headers=headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=job["timeout"]) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # 4xx / 5xx still have a body worth logging
        status, body = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        print(f"request failed: {getattr(exc, 'reason', exc)}", flush=True)
        return 1
    elapsed = (time.monotonic() - started) * 1000
    print(f"HTTP {status} in {elapsed:.0f} ms, {len(body)} bytes", flush=True)
    limit = job["max_log_bytes"]
    print(body[:limit].decode(errors="replace"), flush=True)
    if len(body) > limit:
        print(f"... {len(body) - limit} more bytes not shown (maxLogBytes {limit})", flush=True)
    try:
        outputs = verdict(job, status, body)
    except CheckFailed as exc:
        print(f"check failed: {exc}", flush=True)
        return 1
    for name, value in outputs.items():
        print(f"${{setValue({name}={value})}}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    headers = json.loads(os.environ.pop("PORPOISE_HTTP_HEADERS", "{}"))
    return run(job, headers)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
