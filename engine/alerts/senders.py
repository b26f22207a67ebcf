"""Alert sender plugins, discovered through the ``porpoise.alerts`` entry-point group.

A sender gets the alert (title, content, type, instance ...) and its configured params; it raises
:class:`SendError` when delivery failed. Params may hold secrets (an SMTP password, a webhook token in
a header or the URL): :func:`redact` removes their values from any text that is logged or stored.
"""

from __future__ import annotations

import email.message
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any, ClassVar

import aiosmtplib

from engine.alerts.http import SendError, post_json
from engine.alerts.netguard import AddressPolicy
from engine.tasks.base import ParamError

GROUP = "porpoise.alerts"
#: params whose values are secrets wherever they appear (sealed at rest, masked in answers, cut from logs):
#: passwords, tokens, signing secrets, and webhook URLs, which carry their service's token
SECRET_KEYS = frozenset({
    "password", "headers", "url", "token", "Password", "secret", "Secret", "botToken", "IntegrationKey",
    "webHook", "WebHook",
})  # fmt: skip

__all__ = ["SECRET_KEYS", "AlertSender", "SendError", "masked", "plugins", "redact", "require", "smtp_send", "validate"]


class AlertSender:
    plugin_type: ClassVar[str] = ""
    #: JSON Schema of the params (GET /api/v1/alert-types; the UI draws the sender's form from it). Secret
    #: params carry ``"writeOnly": true`` and ``"format": "password"``; :meth:`validate` is the check that counts.
    params_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    #: the params that are secrets (masked when shown, kept on an edit that sends "***" back)
    secret: ClassVar[tuple[str, ...]] = ()

    def __init__(self, guard: AddressPolicy | None = None, script_dir: str = "") -> None:
        #: the addresses a sender calling URLs may reach (netguard.py); the strict default when not given
        self.guard = guard or AddressPolicy()
        #: where SCRIPT senders' executables are (api.alert_script_dir); empty: none may run
        self.script_dir = script_dir

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        raise NotImplementedError

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        raise NotImplementedError


def secret_param(description: str, **more: Any) -> dict[str, Any]:
    """A secret param's schema: a string never shown back (the API answers "***")."""
    return {"type": "string", "description": description, "writeOnly": True, "format": "password", **more}


def schema(required: list[str], properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties, **more}


def require(params: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = params.get(key)
    if not isinstance(value, kind) or value in ("", []):
        raise ParamError(key, "is required")
    return value


class WebhookSender(AlertSender):
    """POST the alert as JSON. Params: ``url``, optional ``headers`` (name -> value). Only to addresses the
    guard allows (api.alert_webhook_allow / deny), connecting to the addresses it checked; no redirects."""

    plugin_type = "WEBHOOK"
    secret = ("url", "headers")
    params_schema = schema(["url"], {
        "url": secret_param("http(s) URL the alert is POSTed to as JSON (a secret: it may carry a token)",
                            pattern="^https?://"),
        "headers": {"type": "object", "additionalProperties": {"type": "string"}, "writeOnly": True,
                    "description": "extra request headers, name -> value (secrets: never shown back)"},
    })  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        url = require(params, "url", str)
        if not url.startswith(("http://", "https://")):
            raise ParamError("url", "must be an http:// or https:// URL")
        headers = params.get("headers", {})
        if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
            raise ParamError("headers", "must map header names to strings")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        status, _ = await post_json(self.guard, params["url"], dict(alert), timeout, headers=params.get("headers"))
        if status >= 300:
            raise SendError(f"webhook answered HTTP {status}")


class EmailSender(AlertSender):
    """Mail the alert. Params: ``host``, ``port`` (25), ``sender``, ``receivers`` (list), optional
    ``user`` / ``password``, ``tls`` (none | starttls | ssl)."""

    plugin_type = "EMAIL"
    secret = ("password",)
    params_schema = schema(["host", "sender", "receivers"], {
        "host": {"type": "string", "description": "SMTP server host name"},
        "port": {"type": "integer", "default": 25, "description": "SMTP server port"},
        "sender": {"type": "string", "description": "the From address"},
        "receivers": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1,
                      "description": "the addresses the alert is mailed to"},
        "user": {"type": "string", "description": "SMTP user name (optional)"},
        "password": secret_param("SMTP password (optional)"),
        "tls": {"enum": ["none", "starttls", "ssl"], "default": "none", "description": "how the connection is secured"},
    })  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        require(params, "host", str)
        require(params, "sender", str)
        receivers = require(params, "receivers", list)
        if not all(isinstance(r, str) and "@" in r for r in receivers):
            raise ParamError("receivers", "must be a list of e-mail addresses")
        if not isinstance(params.get("port", 25), int):
            raise ParamError("port", "must be an integer")
        if params.get("tls", "none") not in ("none", "starttls", "ssl"):
            raise ParamError("tls", "must be none, starttls or ssl")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        msg = email.message.EmailMessage()
        msg["From"] = params["sender"]
        msg["To"] = ", ".join(params["receivers"])
        msg["Subject"] = f"[Porpoise] {alert['title']}"
        links = "".join(f"\n{alert[k]}" for k in ("link", "log_link") if alert.get(k))
        msg.set_content(f"{alert['content']}\n{links}\nalert {alert['id']}, type {alert['alert_type_name']}")
        await smtp_send(msg, params, timeout)


async def smtp_send(msg: email.message.EmailMessage, params: Mapping[str, Any], timeout: float) -> None:
    """Deliver ``msg`` through the SMTP server of EMAIL sender ``params`` (secrets open); SendError when not."""
    tls = params.get("tls", "none")
    try:
        await aiosmtplib.send(
            msg,
            hostname=params["host"],
            port=int(params.get("port", 25)),
            username=params.get("user") or None,
            password=params.get("password") or None,
            use_tls=tls == "ssl",
            start_tls=tls == "starttls",
            timeout=timeout,
        )
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        raise SendError(f"smtp: {type(exc).__name__}: {exc}") from None


@cache
def plugins() -> Mapping[str, type[AlertSender]]:
    found: dict[str, type[AlertSender]] = {}
    for ep in entry_points(group=GROUP):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, AlertSender)) or cls.plugin_type != ep.name:
            raise ValueError(f"entry point {ep.name} = {ep.value} is not an AlertSender of that type")
        found[ep.name] = cls
    return found


def validate(plugin_type: str, params: Mapping[str, Any]) -> None:
    cls = plugins().get(plugin_type)
    if cls is None:
        raise ParamError("type", f"unknown alert sender {plugin_type!r} (known: {', '.join(sorted(plugins()))})")
    cls.validate(params)


def _secrets(params: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in params.items():
        if key in SECRET_KEYS:
            if isinstance(value, Mapping):
                out += [str(v) for v in value.values()]
            elif value:
                out.append(str(value))
    return [s for s in out if len(s) >= 4]


def redact(text: str, params: Mapping[str, Any]) -> str:
    for secret in sorted(_secrets(params), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def masked(params: Mapping[str, Any]) -> dict[str, Any]:
    """Params as the API shows them: secrets replaced."""
    out = {}
    for key, value in params.items():
        if key in SECRET_KEYS and value:
            out[key] = {k: "***" for k in value} if isinstance(value, Mapping) else "***"
        else:
            out[key] = value
    return out
