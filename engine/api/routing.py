"""The API's route table and the plumbing every call goes through.

Each :class:`Route` declares its method, path, query parameters and request-body schema once; the same
declaration registers the aiohttp handler, checks the request before the handler runs (a bad value is a
400 naming the field, never a traceback) and produces the OpenAPI document (openapi.py).

Errors are JSON: ``{"error": {"status": 400, "message": "...", "field": "tasks[2].upstream"}}``.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
import jsonschema
from aiohttp import web

from core import logs
from core.errors import PorpoiseError
from core.schema_problem import schema_problem
from engine.storage import sql
from engine.storage.failures import CONNECTION_LOST

if TYPE_CHECKING:
    from engine.api.access import Rule

log = logs.get(__name__)

PREFIX = "/api/v1"
#: what the authentication middleware and the access check leave on a request (access.Principal; ids)
PRINCIPAL: web.RequestKey[Any] = web.RequestKey("principal", object)
USER_ID: web.RequestKey[int] = web.RequestKey("user_id", int)
#: the answer a handler began to send (its status and headers are out): routing.remember_started
STARTED: web.RequestKey[web.StreamResponse] = web.RequestKey("started", web.StreamResponse)
PROJECT_CODE: web.RequestKey[int] = web.RequestKey("project_code", int)
#: the user name a login tried (audit log of failed logins)
AUDIT_USER: web.RequestKey[str] = web.RequestKey("audit_user", str)
MAX_PAGE_SIZE = 500
#: the last page number a list accepts (its offset stays far inside PostgreSQL's bigint)
MAX_PAGE = 1_000_000
#: integers the database holds (bigint); a JSON or query value beyond answers 400, not a database error
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "required": ["status", "message"],
            "properties": {
                "status": {"type": "integer"},
                "message": {"type": "string"},
                "field": {"type": "string", "description": "the offending field, e.g. tasks[2].upstream"},
                "details": {"type": "array", "items": {"type": "object"}, "description": "the items at fault"},
            },
        }
    },
}


class ApiError(PorpoiseError):
    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        details: list[Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        #: the individual problems, when there are several (e.g. each unsupported task of an import)
        self.details = details
        #: seconds, sent as Retry-After (429 of the login throttle)
        self.retry_after = retry_after


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} does not exist")


async def one(db: sql.Executor, stmt: Any, what: str) -> Any:
    """The single row ``stmt`` selects, or a 404 naming ``what``."""
    row = await sql.fetchrow(db, stmt)
    if row is None:
        raise not_found(what)
    return row


@dataclass(frozen=True)
class Param:
    """A query parameter: ``kind`` is int, str, bool or datetime (ISO 8601)."""

    name: str
    kind: type = str
    description: str = ""
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None

    def parse(self, raw: str) -> Any:
        where = f"query.{self.name}"
        if self.kind is int:
            try:
                value: Any = int(raw)
            except ValueError:
                raise ApiError(400, f"must be an integer, got {quoted(raw)}", where) from None
            if not INT64_MIN <= value <= INT64_MAX:
                raise ApiError(400, "must fit in 64 bits", where)
            if self.minimum is not None and value < self.minimum:
                raise ApiError(400, f"must be >= {self.minimum}", where)
            if self.maximum is not None and value > self.maximum:
                raise ApiError(400, f"must be <= {self.maximum}", where)
            return value
        if self.kind is bool:
            if raw.lower() in ("1", "true", "yes"):
                return True
            if raw.lower() in ("0", "false", "no"):
                return False
            raise ApiError(400, f"must be true or false, got {quoted(raw)}", where)
        if self.kind is dt.datetime:
            try:
                value = dt.datetime.fromisoformat(raw)
                # in UTC here: a time near year 1 or 9999 with an offset is no instant the database holds
                return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
            except (ValueError, OverflowError):
                raise ApiError(400, f"must be an ISO 8601 time, got {quoted(raw)}", where) from None
        if self.choices and raw not in self.choices:
            raise ApiError(400, f"must be one of {', '.join(self.choices)}, got {quoted(raw)}", where)
        return raw


PAGE = (
    Param("page", int, "page number, from 1", 1, minimum=1, maximum=MAX_PAGE),
    Param("size", int, f"items per page (at most {MAX_PAGE_SIZE})", 50, minimum=1, maximum=MAX_PAGE_SIZE),
)


@dataclass
class Call:
    """What a handler gets: the request, its path parameters, checked query and body."""

    request: web.Request
    path: dict[str, str]
    query: dict[str, Any]
    body: Any
    user_id: int | None = None

    @property
    def principal(self) -> Any:
        """The caller (access.Principal); set by the API's authentication before any handler runs."""
        return self.request.get(PRINCIPAL)

    def path_int(self, name: str) -> int:
        return path_int(self.path[name], f"path.{name}")

    @property
    def offset(self) -> int:
        return int((self.query["page"] - 1) * self.query["size"])


Handler = Callable[[Any, Call], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    query: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None
    #: an empty body counts as {} when False
    body_required: bool = True
    #: JSON schema of a successful answer (documentation)
    response: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    status: int = 200
    auth: bool = True
    #: media type of a successful answer
    produces: str = "application/json"
    #: media type of a body the handler reads itself, streaming (``body`` is then None): an upload
    consumes: str = ""
    #: who may call it (engine/api/access.py); a route without one is admin-only, and tests/test_permissions.py
    #: fails until it has one
    rule: Rule | None = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.decode(errors="replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, default=_jsonable, separators=(",", ":")),
        status=status,
        content_type="application/json",
    )


def error_response(
    status: int, message: str, field: str | None = None, details: list[Any] | None = None
) -> web.Response:
    body: dict[str, Any] = {"status": status, "message": message}
    if field:
        body["field"] = field
    if details:
        body["details"] = details
    return json_response({"error": body}, status)


async def select_page(
    db: Any, call: Call, table: str, equal: dict[str, Any], order: str, visible: Callable[[int], str] | None = None
) -> tuple[list[asyncpg.Record], int]:
    """One page of ``table``'s rows whose columns equal the given values (None: no filter), and the total;
    ``visible(n)``, when given, is a further condition on the caller's user id as $n (access.py).
    Table, column and order names come from the code, never from the request."""
    where, args = [], []
    for column, value in equal.items():
        if value is not None:
            args.append(value)
            where.append(f"{column} = ${len(args)}")
    if visible is not None:
        args.append(call.principal.user_id)
        where.append(visible(len(args)))
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    total = await db.fetchval(f"SELECT count(*) FROM {table}{cond}", *args)
    rows = await db.fetch(
        f"SELECT * FROM {table}{cond} ORDER BY {order} LIMIT {int(call.query['size'])} OFFSET {call.offset}", *args
    )
    return rows, int(total)


def page(items: list[Any], total: int, call: Call) -> dict[str, Any]:
    return {"items": items, "total": total, "page": call.query["page"], "size": call.query["size"]}


def bind(api: Any, route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The aiohttp handler of ``route``: parse the query and body, check the caller's right (access.py),
    check the body against its schema, call, encode."""
    from engine.api import access

    validator = jsonschema.Draft202012Validator(route.body) if route.body is not None else None
    known = {p.name for p in route.query}
    rule = route.rule or access.ADMIN

    async def handle(request: web.Request) -> web.StreamResponse:
        for where, values in (("path", request.match_info), ("query", request.query)):
            for name, raw in values.items():
                why = text_problem(raw)
                if why:
                    raise ApiError(400, why, f"{where}.{name}")
        query: dict[str, Any] = {}
        for p in route.query:
            raw = request.query.get(p.name)
            query[p.name] = p.default if raw is None or raw == "" else p.parse(raw)
        unknown = sorted(set(request.query) - known)
        if unknown:
            raise ApiError(400, "unknown query parameter", f"query.{unknown[0]}")
        body: Any = None
        if validator is not None:
            raw_body = await request.read()
            if not raw_body and route.body_required:
                raise ApiError(400, "a JSON body is required", "body")
            try:
                body = json.loads(raw_body, parse_constant=_no_constant) if raw_body else {}
            except (ValueError, UnicodeDecodeError) as exc:
                raise ApiError(400, f"body is not valid JSON: {exc}", "body") from None
            except RecursionError:
                raise ApiError(400, "body is nested too deeply", "body") from None
            try:
                unusable = body_problem(body)
            except RecursionError:
                unusable = ("body", "is nested too deeply")
            if unusable is not None:
                raise ApiError(400, unusable[1], unusable[0])
        call = Call(request, dict(request.match_info), query, body, request.get(USER_ID))
        await access.check(api.db, rule, call)
        if validator is not None:
            problem = schema_problem(validator, body)
            if problem is not None:
                raise ApiError(400, problem[1], problem[0])
        result = await route.handler(api, call)
        if isinstance(result, web.StreamResponse):
            return result
        return json_response(result, route.status)

    return handle


def quoted(value: Any, limit: int = 64) -> str:
    """``repr(value)`` for an error message, shortened: an answer never echoes large input back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def path_int(raw: Any, field: str) -> int:
    """A 64-bit integer from a route or body value; ApiError 400 naming ``field`` otherwise."""
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ApiError(400, f"must be an integer, got {quoted(raw)}", field) from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise ApiError(400, "must fit in 64 bits", field)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def text_problem(value: str) -> str:
    """Why PostgreSQL cannot hold ``value`` as text ("" when it can)."""
    if "\x00" in value:
        return "must not contain a NUL character"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "contains an invalid Unicode escape (a lone surrogate)"
    return ""


def body_problem(value: Any, where: str = "") -> tuple[str, str] | None:
    """(field, reason) of the first value JSON allows but nothing behind the API can hold: a string with a
    lone surrogate (``"\\ud800"``: not encodable as UTF-8), an integer beyond 64 bits; None when there is none."""
    if isinstance(value, str):
        why = text_problem(value)
        if why:
            return where or "body", why
    elif isinstance(value, bool):
        return None
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return where or "body", "must fit in 64 bits"
    elif isinstance(value, dict):
        for key, item in value.items():
            field = f"{where}.{key}" if where else str(key)
            found = body_problem(key, field) or body_problem(item, field)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = body_problem(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


async def remember_started(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: note the answer whose status and headers are out (a stream's, at its start)."""
    request[STARTED] = response


@web.middleware
async def errors_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except Exception as exc:
        started = request.get(STARTED)
        if started is None:
            return _error_answer(request, exc)
        # the handler's own answer is under way (a stream): a second one must not be written into it
        if isinstance(exc, CONNECTION_LOST):
            log.warning("database unavailable; stream ended", path=request.path, error=str(exc))
        else:
            log.exception("api stream failed", incident=uuid.uuid4().hex[:12], path=request.path)
        if started.content_type == "text/event-stream":
            return started  # ended where it is: the reader resumes from its last event id
        raise  # anything else is cut off (aiohttp closes the connection): a partial download is not complete


def _error_answer(request: web.Request, exc: Exception) -> web.StreamResponse:
    if isinstance(exc, ApiError):
        response = error_response(exc.status, exc.message, exc.field, exc.details)
        if exc.retry_after is not None:
            response.headers["Retry-After"] = str(exc.retry_after)
        return response
    if isinstance(exc, CONNECTION_LOST):
        log.warning("database unavailable", path=request.path, error=str(exc))
        return error_response(503, "the metadata database is not reachable right now; retry shortly")
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        message = exc.reason
        if exc.status == 413:
            message = "request body too large"
        return error_response(exc.status, message)
    incident = uuid.uuid4().hex[:12]
    log.exception("api handler failed", incident=incident, path=request.path, method=request.method)
    return error_response(500, f"internal error (incident {incident}; see the API server log)")
