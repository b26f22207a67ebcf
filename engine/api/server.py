"""The API server process (``python -m engine.api``): aiohttp JSON REST over the metadata database.

It writes definitions and commands, reads instances, proxies task logs from the worker that wrote them,
and tells masters about definition changes (cache.expire) and stop/pause requests (workflow.control).
It holds no registry lease: it only reads cluster membership (a watch of ``nodes/``), so any number of
API servers can run side by side behind a load balancer.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
import uvloop
from aiohttp import web

from core import logs, marks
from core.errors import ConfigError, PorpoiseError
from engine import config as config_mod
from engine.accounts.tokens import mark_used, token_hash
from engine.alerts.netguard import AddressPolicy
from engine.alerts.service import AlertService
from engine.api import (
    access,
    alert_types,
    alerts,
    audit,
    cluster,
    datasources,
    environments,
    grants,
    instances,
    live,
    migrate,
    openapi,
    overview,
    project_params,
    projects,
    resources,
    schedules,
    sessions,
    static,
    task_groups,
    task_types,
    tasks,
    tenants,
    tokens,
    users,
    waiting,
    worker_groups,
    workflow_start,
    workflows,
)
from engine.api.access import Principal
from engine.api.directory import Directory
from engine.api.logarchive import LogArchiver
from engine.api.ratelimit import RateLimiter
from engine.api.routing import (
    PRINCIPAL,
    USER_ID,
    ApiError,
    Call,
    Route,
    bind,
    error_response,
    errors_middleware,
    json_response,
    remember_started,
)
from engine.api.tasklogs import ArchivedLogs
from engine.api.tokencache import TokenCache
from engine.config import Config, is_loopback
from engine.datafiles import ui_dist
from engine.metrics import CONTENT_TYPE, NodeMetrics
from engine.node import exit_code, parse_args
from engine.secretbox import Keyring
from engine.storage.blobs import BlobStore, blob_store
from engine.storage.pool import connect_pool, database_reachable
from registry import EtcdAccess, EtcdClient, MembershipView, RegistryUnavailable
from rpc import RpcClient
from rpc.errors import RpcError
from rpc.messages import CacheExpire
from rpc.tls import TlsFiles, client_context

log = logs.get(__name__)

#: routes whose answers are streams lasting as long as a browser tab (counted open, not timed)
STREAM_ROUTES = frozenset({"/api/v1/events", "/api/v1/tasks/{id}/log/follow"})

ROUTES: list[Route] = [
    *projects.ROUTES,
    *project_params.ROUTES,
    *resources.ROUTES,
    *workflows.ROUTES,
    *workflow_start.ROUTES,
    *instances.ROUTES,
    *waiting.ROUTES,
    *schedules.ROUTES,
    *tasks.ROUTES,
    *cluster.ROUTES,
    *datasources.ROUTES,
    *tokens.ROUTES,
    *alerts.ROUTES,
    *alert_types.ROUTES,
    *migrate.ROUTES,
    *users.ROUTES,
    *sessions.ROUTES,
    *grants.ROUTES,
    *audit.ROUTES,
    *task_groups.ROUTES,
    *live.ROUTES,
    *overview.ROUTES,
    *tenants.ROUTES,
    *environments.ROUTES,
    *worker_groups.ROUTES,
    *task_types.ROUTES,
]


def _too_many(wait: int) -> web.Response | None:
    """The 429 of a rate limit (api.rate_limit_*), or None when ``wait`` is 0."""
    if not wait:
        return None
    response = error_response(429, f"too many requests; retry in {wait} s")
    response.headers["Retry-After"] = str(wait)
    return response


#: on every answer (the UI, the API, errors, streams): no framing, no MIME sniffing, scripts and
#: connections only from this origin (the docs page's inline style is the one inline thing allowed); <base href>
#: of this origin only (the UI finds its assets by it)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self';"
    " frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _security_headers(_: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


class ApiServer:
    def __init__(self, cfg: Config, routes: Sequence[Route] | None = None) -> None:
        if not cfg.rpc.secret:
            raise ConfigError("rpc.secret: required (the API signs its calls to masters and workers)")
        self.cfg = cfg
        self.pool: asyncpg.Pool | None = None
        self._blobs: BlobStore | None = None
        self.metrics = NodeMetrics("api")
        #: open event streams (their requests last as long as the browser tab)
        self.streams = 0
        self.metrics.gauge("event_streams", lambda: self.streams)
        tls = TlsFiles.of(cfg.rpc)
        self.rpc = RpcClient(
            cfg.rpc.secret,
            cfg.rpc.timeout,
            ssl=client_context(tls) if tls else None,
            observe=self.metrics.rpc_latency,
            use_streams=cfg.rpc.stream,
        )
        #: seals data source and alert sender secrets before they are stored; opens them to deliver alerts
        self.keyring = Keyring.from_config(cfg.secrets)
        #: the LDAP directory users sign in with (ldap.enabled), else None: local passwords only
        self.directory = Directory(cfg.ldap) if cfg.ldap.enabled else None
        self.etcd = EtcdClient(cfg.registry.endpoints, cfg.registry.request_timeout, EtcdAccess.of(cfg.registry))
        self.membership = MembershipView(self.etcd, cfg.registry.root)
        self._membership_task: asyncio.Task[None] | None = None
        self.alerts: AlertService | None = None
        #: local copies of archived task logs (engine/api/tasklogs.py), and the archiver (in ``blobs``)
        self.archived_logs: ArchivedLogs | None = None
        self.log_archiver: LogArchiver | None = None
        api = cfg.api
        self.live = live.LiveHub(
            cfg.database.url(), api.events_batch_seconds, api.events_heartbeat_seconds, api.events_history
        )
        self.tokens = TokenCache(api.token_cache_seconds, self._token_user)
        #: request rates per user and per client address (calls without valid credentials)
        self.user_rate = RateLimiter(api.rate_limit_per_second, api.rate_limit_burst)
        self.address_rate = RateLimiter(api.anonymous_rate_limit_per_second, api.anonymous_rate_limit_burst)
        self._stop = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.address = ""
        self.app = web.Application(
            client_max_size=cfg.api.max_body_bytes,
            middlewares=[self._metrics_middleware, self._audit_middleware, errors_middleware, self._auth_middleware],
        )
        self.routes = {(r.method, r.path): r for r in (ROUTES if routes is None else routes)}
        for route in self.routes.values():
            self.app.router.add_route(route.method, route.path, bind(self, route))
        self.public = {
            key for key, r in self.routes.items() if r.rule is not None and r.rule.need is access.Need.PUBLIC
        }
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/ready", self._ready)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_get("/openapi.json", self._openapi)
        self.app.router.add_get("/docs", self._docs)
        static.UiFiles(ui_dist(cfg.api.ui_dir)).add_routes(self.app)
        self.app.on_response_prepare.append(_security_headers)
        self.app.on_response_prepare.append(remember_started)

    # -- helpers handlers use ---------------------------------------------------------------------

    @property
    def db(self) -> asyncpg.Pool:
        if self.pool is None:
            raise ApiError(503, "the database is not connected yet")
        return self.pool

    @property
    def blobs(self) -> BlobStore:
        """Where resource files live (storage.type), made on first use."""
        if self._blobs is None:
            self._blobs = blob_store(self.cfg, self.db)
        return self._blobs

    def masters(self) -> list[str]:
        return [m.address for m in self.membership.masters()]

    async def expire_caches(self, code: int) -> None:
        """Tell every live master that definition ``code`` changed (best effort: the cache also expires
        on its own after its TTL)."""
        masters = self.masters()
        calls = [self.rpc.call(m, CacheExpire(code), timeout=2.0) for m in masters]
        for address, result in zip(masters, await asyncio.gather(*calls, return_exceptions=True), strict=True):
            if isinstance(result, RpcError | OSError):
                log.warning("cache expire failed", master=address, error=str(result))

    # -- middleware -------------------------------------------------------------------------------

    def _route(self, request: web.Request) -> Route | None:
        resource = request.match_info.route.resource
        return self.routes.get((request.method, resource.canonical)) if resource is not None else None

    @web.middleware
    async def _metrics_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every API request's time by route template (not the raw path: bounded label values) and
        status class; the live-event streams are counted open instead (they last for hours)."""
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None and request.path.startswith("/api/") else "other"
        if route in STREAM_ROUTES:
            self.streams += 1
            try:
                return await handler(request)
            finally:
                self.streams -= 1
        start = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            labels = {"method": request.method, "route": route, "status": f"{status // 100}xx"}
            self.metrics.observe("http_request_seconds", time.perf_counter() - start, **labels)

    @web.middleware
    async def _audit_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await handler(request)
        route = self._route(request)
        if route is not None:
            await audit.record(self, request, route, response.status)
        return response

    @web.middleware
    async def _auth_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Who calls: a Bearer token, else a session cookie (with its CSRF token on calls that change
        something). The route's rule (access.py) then decides what they may do."""
        route = request.match_info.route
        path = route.resource.canonical if route.resource is not None else ""
        if not request.path.startswith("/api/") or (request.method, path) in self.public:
            if request.path != "/health":
                limited = _too_many(self.address_rate.take(request.remote))
                if limited is not None:
                    return limited
            return await handler(request)
        header = request.headers.get("Authorization", "")
        cookie = request.cookies.get(sessions.COOKIE)
        principal: Principal | None = None
        refusal: web.Response | None = None
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                refusal = error_response(401, "malformed Authorization header (Authorization: Bearer <token>)")
            else:
                principal = await self._check_token(token.strip())
                if principal is None:
                    refusal = error_response(401, "invalid or expired API token")
        elif cookie:
            found = await sessions.session_user(self.db, cookie)
            if found is None:
                refusal = error_response(401, "your session has ended; sign in again")
            else:
                principal, csrf_hash = found
                if request.method not in sessions.SAFE_METHODS and not sessions.csrf_ok(
                    csrf_hash, request.headers.get(sessions.CSRF_HEADER)
                ):
                    header_name = sessions.CSRF_HEADER
                    return error_response(403, f"missing or wrong {header_name} header (cookie sessions need it)")
        else:
            refusal = error_response(401, "sign in first (Authorization: Bearer <token>, or POST /api/v1/login)")
        if principal is None:  # no valid credentials: counted per client address (guessing tokens included)
            return _too_many(self.address_rate.take(request.remote)) or refusal or error_response(401, "sign in first")
        limited = _too_many(self.user_rate.take(principal.user_id))
        if limited is not None:
            return limited
        request[PRINCIPAL] = principal
        request[USER_ID] = principal.user_id
        return await handler(request)

    async def _check_token(self, token: str) -> Principal | None:
        return await self.tokens.principal(token_hash(token))

    async def _token_user(self, digest: str) -> Principal | None:
        principal = await tokens.token_user(self.db, digest)
        if principal is not None and principal.token_id is not None:
            await mark_used(self.db, principal.token_id)
        return principal

    async def still_allowed(self, call: Call) -> bool:
        """Whether the caller of a long-lived answer (an event stream, a log follow) may still make the call:
        its credentials still valid (not revoked, expired, signed out, user disabled) and the route's rule
        still met (a grant revoked meanwhile). Streams ask this while they run and end when it says no."""
        request = call.request
        principal: Principal | None = None
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                principal = await self._check_token(token.strip())
        elif request.cookies.get(sessions.COOKIE):
            found = await sessions.session_user(self.db, request.cookies[sessions.COOKIE])
            principal = found[0] if found is not None else None
        if principal is None:
            return False
        request[PRINCIPAL] = principal
        route = self._route(request)
        if route is not None and route.rule is not None:
            try:
                await access.check(self.db, route.rule, call)
            except ApiError:
                return False
        return True

    def forget_token(self, digest: str) -> None:
        """A revoked token stops working on this API server at once (others: within token_cache_seconds)."""
        self.tokens.forget(digest)

    def forget_user(self, user_id: int) -> None:
        """A changed or disabled user's cached tokens are looked up again."""
        self.tokens.forget_user(user_id)

    # -- unauthenticated endpoints ----------------------------------------------------------------

    async def _health(self, _: web.Request) -> web.Response:
        """Liveness: the process answers. Whether it can serve: /ready."""
        return json_response({"role": "api", "address": self.address})

    async def _ready(self, _: web.Request) -> web.Response:
        """Readiness: the database answers and the cluster view is loaded."""
        db_ok = await database_reachable(self.pool)
        registry_ok = self.membership.ready.is_set()
        body = {"role": "api", "address": self.address, "database": db_ok, "registry": registry_ok}
        return json_response({**body, "ready": db_ok and registry_ok}, 200 if db_ok and registry_ok else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        wanted = self.cfg.api.metrics_token
        if wanted:
            given = request.headers.get("Authorization", "").partition(" ")[2].strip()
            if not hmac.compare_digest(given.encode(), wanted.encode()):
                return error_response(401, "metrics need Authorization: Bearer <api.metrics_token>")
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _openapi(self, _: web.Request) -> web.Response:
        return json_response(openapi.document(ROUTES))

    async def _docs(self, _: web.Request) -> web.Response:
        return web.Response(text=openapi.docs_page(openapi.document(ROUTES)), content_type="text/html")

    # -- lifecycle --------------------------------------------------------------------------------

    async def _watch_cluster(self) -> None:
        delay = 0.2
        while True:
            try:
                await self.membership.start()
                return
            except RegistryUnavailable as exc:
                log.warning("registry unavailable; cluster view retrying", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def start(self) -> None:
        self.pool = await connect_pool(self.cfg.database, self._stop, self.metrics.pool_wait, reset_sessions=False)
        self._membership_task = asyncio.create_task(self._watch_cluster(), name="api-membership")
        api = self.cfg.api
        if api.alerts_enabled:
            guard = AddressPolicy(api.alert_webhook_allow, api.alert_webhook_deny)
            self.alerts = AlertService(
                self.pool,
                api.alert_poll_interval,
                api.alert_max_attempts,
                api.alert_retry_seconds,
                api.alert_timeout,
                guard,
                self.keyring,
                api.alert_script_dir,
                api.public_url,
            )
            self.alerts.start()
        self.archived_logs = ArchivedLogs(self.blobs, api.log_cache_dir, api.log_cache_bytes)
        if api.log_archive_enabled:
            self.log_archiver = LogArchiver(
                self.pool,
                self.rpc,
                self.blobs,
                interval=api.log_archive_interval,
                max_bytes=api.log_archive_max_bytes,
                retry_seconds=api.log_archive_retry_seconds,
                max_tries=api.log_archive_max_tries,
            )
            self.log_archiver.start()
        self.live.start()
        self.metrics.start_lag_probe()
        self.runner = web.AppRunner(self.app, access_log=None)
        await self.runner.setup()
        ssl_context = None
        if api.tls_cert:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
            try:
                ssl_context.load_cert_chain(api.tls_cert, api.tls_key)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"api.tls_cert / api.tls_key: {exc}") from exc
        site = web.TCPSite(self.runner, api.listen_host, api.listen_port, ssl_context=ssl_context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.address = f"{api.listen_host}:{port}"
        if ssl_context is None:
            log.warning(
                "the API serves plain HTTP: tokens and passwords cross the network in clear (set api.tls_cert and"
                " api.tls_key)",
                address=self.address,
                loopback=is_loopback(api.listen_host),
            )
        log.info("api started", address=self.address, https=ssl_context is not None)

    async def close(self) -> None:
        await self.live.close()  # ends the event streams, so the runner's cleanup does not wait for them
        if self.alerts is not None:
            await self.alerts.close()
        if self.log_archiver is not None:
            await self.log_archiver.close()
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
        await self.tokens.close()
        if self._membership_task is not None:
            self._membership_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._membership_task
        await self.membership.close()
        await self.etcd.close()
        await self.rpc.close()
        await self.metrics.close()
        if self.archived_logs is not None:
            await self.archived_logs.close()
        if self._blobs is not None:
            await self._blobs.close()
        if self.pool is not None:
            await self.pool.close()
        log.info("api stopped", address=self.address)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        try:
            await self.start()
            logs.configure(self.cfg.logging.format, self.cfg.logging.level, node=f"api@{self.address}")
            await self._stop.wait()
        finally:
            await self.close()
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args("python -m engine.api", argv)
    try:
        cfg = config_mod.load(args.config, args.overrides)
    except PorpoiseError as exc:
        print(f"porpoise api: {exc}", file=sys.stderr)
        return 2
    logs.configure(cfg.logging.format, cfg.logging.level, node="api")
    try:
        if cfg.debug.step_marks:
            marks.start(cfg.debug.step_marks)  # benchmark-only (bench/steps.py)
        return uvloop.run(ApiServer(cfg).run())
    except PorpoiseError as exc:
        log.error("api failed", error=str(exc))
        print(f"porpoise api: {exc}", file=sys.stderr)
        return exit_code(exc)
    finally:
        marks.flush()
