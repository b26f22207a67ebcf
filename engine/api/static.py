"""The web UI: the built single-page app (``ui/dist``, made by ``make install``) served at ``/``.

Hashed files under ``assets/`` are cached for a year (their names change with their content); index.html
and the other top-level files are revalidated on every load, so a new build shows at the next page load.
Any other path that is not the API's gets index.html: the app routes it in the browser. Without a build
the API still works and ``/`` says how to build the UI.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from engine.api.routing import PREFIX, ApiError

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

_NOT_BUILT = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Porpoise</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Porpoise</h1>
<p>The web UI is not built here: no <code>index.html</code> in <code>{dist}</code>.</p>
<p>Build it with <code>make install</code> (needs Node.js 20 or newer), or point <code>api.ui_dir</code> at a build.</p>
<p>The JSON API works: <a href="/docs">API reference</a>, <a href="/openapi.json">/openapi.json</a>,
<code>{prefix}</code>.</p></body></html>
"""


class UiFiles:
    """Serves ``dist``: exact files with their cache policy, index.html for the app's own routes."""

    def __init__(self, dist: Path) -> None:
        self.dist = dist

    def add_routes(self, app: web.Application) -> None:
        """Register last: the catch-all must not shadow the API's routes."""
        app.router.add_get("/", self.handle)
        app.router.add_get("/{path:.*}", self.handle)

    def _file(self, rel: str) -> Path | None:
        if not rel:
            return None
        target = (self.dist / rel).resolve()
        if not target.is_relative_to(self.dist.resolve()) or not target.is_file():
            return None
        return target

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == PREFIX or path.startswith(PREFIX + "/"):
            raise ApiError(404, f"no API endpoint GET {path} (see /docs)")
        index = self.dist / "index.html"
        if not index.is_file():
            return web.Response(
                text=_NOT_BUILT.format(dist=self.dist, prefix=PREFIX), status=404, content_type="text/html"
            )
        rel = request.match_info.get("path", "")
        target = self._file(rel)
        if target is None:
            if rel.startswith("assets/"):
                raise web.HTTPNotFound(reason=f"no such asset {rel} (the UI was rebuilt: reload the page)")
            target = index
        cache = IMMUTABLE if rel.startswith("assets/") and target is not index else REVALIDATE
        return web.FileResponse(target, headers={"Cache-Control": cache})
