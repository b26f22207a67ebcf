"""HTTP: one HTTP request, checked, logged, with values taken from the answer.

The worker runs ``python -m engine.tasks.http_runner`` in the task's process group, so kill, timeout,
retries and the log behave as for every task. Parameters (placeholders allowed in url, headers, query
and body):

    url: https://api.example.com/v1/jobs          # required, http or https
    httpMethod: POST                              # GET (default) | POST | PUT | PATCH | DELETE | HEAD
    headers: {Authorization: "Bearer ${token}"}   # values of secret-looking headers are masked in the log
    query: {date: "${biz_date}"}                  # added to the url's query string
    body: {name: "x"}                             # an object or a string
    bodyType: json                                # json (default for an object) | form | raw (default for a string)
    timeoutSeconds: 60                            # connect + read timeout of the request
    expectedStatus: [200, 201]                    # default: any 2xx
    check: {contains: "ok"}                       # or {not_contains: ...} or {json_path: "$.state", equals: "DONE"}
    extract: {job_id: "$.data.id"}                # OUT params from the JSON answer (declare them in localParams)
    maxLogBytes: 65536                            # the answer's body is logged up to this many bytes

Header values reach the runner through its environment, never a file or the log.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from engine.tasks.base import (
    Launch,
    ParamError,
    TaskContext,
    TaskPlugin,
    describe_params,
    optional,
    require_str,
    runner_env,
)

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
BODY_TYPES = ("json", "form", "raw")
#: header names whose values are never shown in the log
SECRET_HEADER = re.compile(r"authorization|cookie|token|secret|password|api[-_]?key|signature", re.IGNORECASE)
#: the JSON path subset: $ then .name, ['name'] or [index] steps
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['([^']*)'\]")


def parse_json_path(path: str) -> list[str | int]:
    """Steps of a JSON path such as ``$.data.items[0].id``; ValueError when it is not of that form."""
    if not path.startswith("$"):
        raise ValueError(f"JSON path {path!r} must start with $")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            raise ValueError(f"JSON path {path!r}: cannot read from {path[pos:]!r} (use .name, [index], ['name'])")
        name, index, quoted = m.groups()
        steps.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = m.end()
    return steps


def _string_map(params: Mapping[str, Any], name: str) -> dict[str, str]:
    value = optional(params, name, dict, {})
    for k, v in value.items():
        if not isinstance(v, str | int | float | bool):
            raise ParamError(f"{name}.{k}", "must be a string, number or boolean")
    return {str(k): str(v) for k, v in value.items()}


class HttpTask(TaskPlugin):
    task_type = "HTTP"
    params_schema = describe_params(
        {
            "url": {"type": "string", "description": "http(s) URL; placeholders allowed"},
            "httpMethod": {"type": "string", "examples": list(METHODS), "default": "GET"},
            "headers": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                        "description": "secret-looking values are masked in the log"},
            "query": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
            "body": {"type": ["string", "object", "array"], "description": "an object (json / form) or text"},
            "bodyType": {"enum": list(BODY_TYPES)},
            "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "default": 60},
            "expectedStatus": {"type": "array", "items": {"type": "integer", "minimum": 100, "maximum": 599},
                               "description": "default: any 2xx"},
            "check": {"type": "object", "description": "{contains}, {not_contains} or {json_path, equals}"},
            "extract": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "OUT param name -> JSON path of the answer"},
            "maxLogBytes": {"type": "integer", "minimum": 0, "default": 65536},
        },
        required=("url",),
        examples=(
            {"url": "https://example.com/", "httpMethod": "GET"},
            {"url": "https://example.com/", "httpMethod": "POST", "headers": {"a": "b"}, "query": {"q": 1},
             "body": {"x": 1}, "bodyType": "json", "timeoutSeconds": 5, "expectedStatus": [200],
             "check": {"json_path": "$.a", "equals": 1}, "extract": {"v": "$.a"}, "maxLogBytes": 10},
        ),
    )  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        url = require_str(params, "url")
        if not re.match(r"(https?://|\$\{)", url):
            raise ParamError("url", "must start with http:// or https:// (or a ${placeholder})")
        method = optional(params, "httpMethod", str, "GET")
        if method.upper() not in METHODS:
            raise ParamError("httpMethod", f"must be one of {', '.join(METHODS)}, got {method!r}")
        _string_map(params, "headers")
        _string_map(params, "query")
        body = params.get("body")
        if body is not None and not isinstance(body, str | dict | list):
            raise ParamError("body", "must be a string or a JSON object / array")
        body_type = optional(params, "bodyType", str, "raw" if isinstance(body, str) else "json")
        if body_type not in BODY_TYPES:
            raise ParamError("bodyType", f"must be one of {', '.join(BODY_TYPES)}, got {body_type!r}")
        if body_type == "form" and not isinstance(body, dict):
            raise ParamError("body", "a form body must be an object of fields")
        timeout = params.get("timeoutSeconds", 60)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86400:
            raise ParamError("timeoutSeconds", "must be a number of seconds in (0, 86400]")
        expected = optional(params, "expectedStatus", list, [])
        if not all(isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in expected):
            raise ParamError("expectedStatus", "must be a list of HTTP status codes (100-599)")
        check = optional(params, "check", dict, {})
        if check:
            keys = set(check)
            if keys not in ({"contains"}, {"not_contains"}, {"json_path", "equals"}):
                raise ParamError("check", "must be {contains: text}, {not_contains: text} or {json_path, equals}")
            if "json_path" in check:
                cls._path(check["json_path"], "check.json_path")
        for name, path in optional(params, "extract", dict, {}).items():
            cls._path(path, f"extract.{name}")
        if optional(params, "maxLogBytes", int, 65536) < 0:
            raise ParamError("maxLogBytes", "must be >= 0")

    @staticmethod
    def _path(path: Any, field: str) -> None:
        if not isinstance(path, str):
            raise ParamError(field, "must be a JSON path such as $.data.id")
        try:
            parse_json_path(path)
        except ValueError as exc:
            raise ParamError(field, str(exc)) from exc

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        body = p.get("body")
        body_type = p.get("bodyType", "raw" if isinstance(body, str) else "json")
        if isinstance(body, str):
            body = ctx.render(body)
        elif body is not None:
            body = json.loads(ctx.render(json.dumps(body)))
        headers = {k: ctx.render(v) for k, v in _string_map(p, "headers").items()}
        job = {
            "method": str(p.get("httpMethod", "GET")).upper(),
            "url": ctx.render(p["url"]),
            "query": {k: ctx.render(v) for k, v in _string_map(p, "query").items()},
            "header_names": sorted(headers),
            "body": body,
            "body_type": body_type,
            "timeout": p.get("timeoutSeconds", 60),
            "expected": p.get("expectedStatus", []),
            "check": {k: ctx.render(v) if isinstance(v, str) and k != "json_path" else v
                      for k, v in p.get("check", {}).items()},
            "extract": dict(p.get("extract", {})),
            "max_log_bytes": p.get("maxLogBytes", 65536),
        }  # fmt: skip
        return Launch(
            argv=[sys.executable, "-m", "engine.tasks.http_runner", "job.json"],
            files={"job.json": json.dumps(job)},
            env=runner_env(),
            secret_env={"PORPOISE_HTTP_HEADERS": json.dumps(headers)},
        )
