"""A small synchronous client of the REST API, used by the ``porpoise`` CLI and the SDK (porpoise.Client).

Where the API is and which token to send, first found wins:

1. ``--api URL`` / ``--token TOKEN`` on the command line;
2. ``PORPOISE_URL`` / ``PORPOISE_TOKEN`` in the environment;
3. a client file ``{"api_url": ..., "token": ..., "ca_file": ...}``: ``PORPOISE_CLIENT_CONFIG``, else the
   first that exists of ``.run/standalone/client.json`` under the current directory (what ``make run``
   writes), ``.run/cluster/client.json`` (what ``make cluster`` writes) and ``~/.config/porpoise/client.json``.

An ``https://`` API's certificate is always verified: against ``ca_file`` (``--ca-file``, ``PORPOISE_CA_FILE``
or the client file's), else the system's trusted CAs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from core.errors import PorpoiseError

T = TypeVar("T")

CLIENT_FILE = "client.json"
DEFAULT_FILES = (
    Path(".run/standalone") / CLIENT_FILE,
    Path(".run/cluster") / CLIENT_FILE,
    Path.home() / ".config" / "porpoise" / CLIENT_FILE,
)


class ApiClientError(PorpoiseError):
    def __init__(
        self, message: str, status: int = 0, field: str | None = None, details: list[Any] | None = None
    ) -> None:
        super().__init__(f"{message} ({field})" if field else message)
        self.status = status
        self.field = field
        #: the API's list of individual problems, when it sent one
        self.details = details or []


@dataclass(frozen=True)
class Target:
    url: str
    token: str
    source: str
    #: PEM file of the CA that signed an https:// API's certificate ("": the system's trusted CAs)
    ca_file: str = ""


def write_client_file(path: Path, url: str, token: str, ca_file: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    data = {"api_url": url, "token": token, **({"ca_file": ca_file} if ca_file else {})}
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def discover(url: str | None = None, token: str | None = None, ca_file: str | None = None) -> Target:
    url = url or os.environ.get("PORPOISE_URL")
    token = token or os.environ.get("PORPOISE_TOKEN")
    ca_file = ca_file or os.environ.get("PORPOISE_CA_FILE")
    source = "command line / environment"
    if not (url and token):
        explicit = os.environ.get("PORPOISE_CLIENT_CONFIG")
        candidates = [Path(explicit)] if explicit else list(DEFAULT_FILES)
        for path in candidates:
            try:
                data = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise ApiClientError(f"cannot read client file {path}: {exc}") from exc
            url = url or data.get("api_url")
            token = token or data.get("token")
            ca_file = ca_file or data.get("ca_file")
            source = str(path)
            break
    if not url:
        raise ApiClientError(
            "no API configured: start Porpoise with `make run` or `make cluster`, or set PORPOISE_URL and "
            "PORPOISE_TOKEN (or pass --api/--token)"
        )
    return Target(url.rstrip("/"), token or "", source, ca_file or "")


class ApiClient:
    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        self.timeout = timeout
        self._ssl: ssl.SSLContext | None = None
        if target.url.startswith("https://"):
            try:
                self._ssl = ssl.create_default_context(cafile=target.ca_file or None)
            except (OSError, ssl.SSLError) as exc:
                raise ApiClientError(f"cannot read the API's CA file {target.ca_file}: {exc}") from None

    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        url = self.target.url + path
        if query:
            clean = {
                k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None
            }
            url += "?" + urllib.parse.urlencode(clean)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.target.token:
            req.add_header("Authorization", f"Bearer {self.target.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                raw = resp.read()
                if resp.headers.get_content_type() != "application/json":
                    return raw.decode(errors="replace")
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raise _error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiClientError(
                f"cannot reach the Porpoise API at {self.target.url} ({reason}); is it running? "
                f"(configuration from {self.target.source})"
            ) from None

    def _url(self, path: str, query: dict[str, Any] | None) -> str:
        clean = {k: v for k, v in (query or {}).items() if v is not None}
        return self.target.url + path + ("?" + urllib.parse.urlencode(clean) if clean else "")

    def upload(self, path: str, source: BinaryIO, size: int, query: dict[str, Any] | None = None) -> Any:
        """POST ``size`` bytes read from ``source`` as a raw body (sent in blocks: any size in bounded memory)."""
        req = urllib.request.Request(self._url(path, query), data=source, method="POST")
        req.add_header("Accept", "application/json")
        req.add_header("Content-Type", "application/octet-stream")
        req.add_header("Content-Length", str(size))
        return self._open(req, lambda resp: json.loads(resp.read() or b"null"))

    def download(self, path: str, sink: BinaryIO, query: dict[str, Any] | None = None) -> dict[str, str]:
        """GET a file into ``sink`` in blocks; the answer's headers. A body shorter than its Content-Length (the
        server's store failed after the answer began) or not matching its X-Resource-Sha256 is an error: a cut
        file is never taken for the whole one."""
        req = urllib.request.Request(self._url(path, query), method="GET")

        def copy(resp: Any) -> dict[str, str]:
            digest, got = hashlib.sha256(), 0
            while block := resp.read(1 << 20):
                sink.write(block)
                digest.update(block)
                got += len(block)
            headers = dict(resp.headers.items())
            expected = headers.get("Content-Length")
            if expected is not None and expected.isdigit() and got != int(expected):
                raise ApiClientError(f"the download was cut off after {got} of {expected} bytes; try again")
            sha = headers.get("X-Resource-Sha256")
            if sha and digest.hexdigest() != sha:
                raise ApiClientError("the downloaded file does not match its checksum; try again")
            return headers

        return self._open(req, copy)

    def _open(self, req: urllib.request.Request, read: Callable[[Any], T]) -> T:
        if self.target.token:
            req.add_header("Authorization", f"Bearer {self.target.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                return read(resp)
        except urllib.error.HTTPError as exc:
            raise _error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiClientError(
                f"cannot reach the Porpoise API at {self.target.url} ({reason}); is it running? "
                f"(configuration from {self.target.source})"
            ) from None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("POST", path, body=body, query=query)

    def put(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("PUT", path, body=body, query=query)

    def patch(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("PATCH", path, body=body, query=query)

    def delete(self, path: str, **query: Any) -> Any:
        return self.request("DELETE", path, query=query)


def _error(exc: urllib.error.HTTPError) -> ApiClientError:
    try:
        err = json.loads(exc.read()).get("error", {})
        return ApiClientError(err.get("message", exc.reason), exc.code, err.get("field"), err.get("details"))
    except (ValueError, AttributeError, OSError):
        return ApiClientError(f"HTTP {exc.code}: {exc.reason}", exc.code)


def connection_parser(common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of every command that talks to the API (a parent parser)."""
    conn = argparse.ArgumentParser(add_help=False, parents=[common])
    conn.add_argument("--api", help="API URL (default: PORPOISE_URL or the client file make run writes)")
    conn.add_argument("--ca-file", help="CA of an https:// API (default: PORPOISE_CA_FILE or the client file)")
    conn.add_argument("--token", help="API token (default: PORPOISE_TOKEN or the client file)")
    conn.add_argument("--json", action="store_true", help="machine-readable output")
    return conn
