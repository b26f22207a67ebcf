"""Chat and incident channels: Slack, Microsoft Teams, DingTalk, WeCom, Feishu / Lark, Telegram, PagerDuty.

Each channel is an :class:`~engine.alerts.senders.AlertSender` registered under ``porpoise.alerts`` and
sends the request its service documents (DolphinScheduler's parameter names where it has the channel,
facts §18.10). Every call goes through :func:`post_json`: the address policy of webhooks (netguard.py)
on the resolved addresses, a pinned connection, no redirects, a timeout. The service's own success flag
(``ok``, ``errcode``, ``code``) decides, not only the HTTP status; a refusal carries the receiver's answer
(cut short) so the alert history shows why.

Services whose API host is fixed (Slack's bot API, WeCom's app API, Telegram, PagerDuty) take an optional
``apiUrl`` to reach a proxy or a test receiver instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import quote_plus

from engine.alerts.http import post_json
from engine.alerts.senders import AlertSender, SendError, require, schema, secret_param
from engine.tasks.base import ParamError

_ANSWER_CHARS = 300


def _url_param(params: Mapping[str, Any], key: str) -> str:
    url = require(params, key, str)
    if not url.startswith(("http://", "https://")):
        raise ParamError(key, "must be an http:// or https:// URL")
    return str(url)


def _optional_url(params: Mapping[str, Any], key: str) -> None:
    if params.get(key) not in (None, ""):
        _url_param(params, key)


def _text(alert: Mapping[str, Any]) -> str:
    """The alert as plain text: its content, then links to the instance (and a task alert's log) when the API
    knows its public URL."""
    lines = [str(alert.get("content") or "")]
    if alert.get("link"):
        lines.append(f"{alert['link']}")
    if alert.get("log_link"):
        lines.append(f"log: {alert['log_link']}")
    return "\n".join(line for line in lines if line)


def _answer(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return text[:_ANSWER_CHARS]


def _json_answer(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


class _JsonChannel(AlertSender):
    """POST one JSON body, check the answer with :meth:`accepted`."""

    service: ClassVar[str] = ""

    async def _post(
        self,
        url: str,
        body: Any,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        accepted: Callable[[int, Any], bool] | None = None,
    ) -> Any:
        status, raw = await post_json(self.guard, url, body, timeout, headers=headers, what=self.service)
        answer = _json_answer(raw)
        ok = accepted(status, answer) if accepted else 200 <= status < 300
        if not ok:
            raise SendError(f"{self.service} refused the message: HTTP {status}: {_answer(answer)}")
        return answer


def _flag(name: str, value: Any = 0) -> Callable[[int, Any], bool]:
    return lambda status, answer: status == 200 and isinstance(answer, dict) and answer.get(name) == value


class SlackSender(_JsonChannel):
    """Slack: an incoming webhook (``webHook``) or a bot token (``botToken`` + ``channel``, chat.postMessage).
    Params: ``username`` (optional). The message: the title in bold, the content, the link."""

    plugin_type = "SLACK"
    secret = ("webHook", "botToken")
    params_schema = schema([], {
        "webHook": secret_param("incoming webhook URL (or give botToken and channel instead)"),
        "botToken": secret_param("bot token (xoxb-...) for chat.postMessage, instead of a webhook"),
        "channel": {"type": "string", "description": "channel id or name to post to with the bot token"},
        "username": {"type": "string", "description": "the name the message is posted as (optional)"},
        "apiUrl": {"type": "string", "description": "Slack API base URL for the bot token (default https://slack.com/api)"},
    })  # fmt: skip
    service = "slack"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        if params.get("webHook"):
            _url_param(params, "webHook")
        elif params.get("botToken"):
            require(params, "channel", str)
            _optional_url(params, "apiUrl")
        else:
            raise ParamError("webHook", "give an incoming webhook URL, or botToken and channel")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        title, text = str(alert["title"]), _text(alert)
        body: dict[str, Any] = {
            "text": f"{title}\n{text}",
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
                {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000] or " "}},
            ],
        }
        if params.get("username"):
            body["username"] = params["username"]
        if params.get("webHook"):
            # an incoming webhook answers 200 with the text "ok"
            await self._post(params["webHook"], body, timeout, accepted=lambda s, a: s == 200 and a == "ok")
            return
        api = str(params.get("apiUrl") or "https://slack.com/api").rstrip("/")
        headers = {"Authorization": f"Bearer {params['botToken']}"}
        await self._post(
            f"{api}/chat.postMessage", {**body, "channel": params["channel"]}, timeout, headers, _flag("ok", True)
        )


class TeamsSender(_JsonChannel):
    """Microsoft Teams incoming webhook (``webHook``): a MessageCard with the title, the content and a button to
    the instance."""

    plugin_type = "TEAMS"
    secret = ("webHook",)
    params_schema = schema(["webHook"], {"webHook": secret_param("the channel's incoming webhook URL")})
    service = "teams"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        _url_param(params, "webHook")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        failed = "FAILURE" in str(alert.get("alert_type_name", "")) or "TIMEOUT" in str(alert.get("alert_type_name"))
        card: dict[str, Any] = {
            "@type": "MessageCard",
            "@context": "http://schema.org/extensions",
            "summary": alert["title"],
            "themeColor": "D70000" if failed else "2EB886",
            "title": alert["title"],
            "text": str(alert.get("content") or ""),
        }
        if alert.get("link"):
            card["potentialAction"] = [
                {"@type": "OpenUri", "name": "Open in Porpoise", "targets": [{"os": "default", "uri": alert["link"]}]}
            ]
        await self._post(params["webHook"], card, timeout)


def dingtalk_signed(url: str, secret: str, now_ms: int) -> str:
    """The webhook URL with DingTalk's signature: HMAC-SHA256 keyed by the secret over "<timestamp>\\n<secret>",
    base64, URL-encoded, as ``&timestamp=&sign=``."""
    digest = hmac.new(secret.encode(), f"{now_ms}\n{secret}".encode(), hashlib.sha256).digest()
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}timestamp={now_ms}&sign={quote_plus(base64.b64encode(digest).decode())}"


def _csv(params: Mapping[str, Any], key: str) -> list[str]:
    raw = params.get(key) or ""
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return [str(i).strip() for i in items if str(i).strip()]


class DingTalkSender(_JsonChannel):
    """DingTalk robot. Params as DolphinScheduler's: ``WebHook``, ``Keyword``, ``Secret`` (signing),
    ``MsgType`` (text | markdown), ``AtMobiles``, ``AtUserIds`` (comma lists), ``IsAtAll``."""

    plugin_type = "DINGTALK"
    secret = ("WebHook", "Secret")
    params_schema = schema(["WebHook"], {
        "WebHook": secret_param("the robot's webhook URL (with its access_token)"),
        "Keyword": {"type": "string", "description": "a keyword the robot requires in each message (optional)"},
        "Secret": secret_param("signing secret (SEC...): the request is signed when set"),
        "MsgType": {"enum": ["text", "markdown"], "default": "text", "description": "message format"},
        "AtMobiles": {"type": "string", "description": "comma-separated mobile numbers to @mention"},
        "AtUserIds": {"type": "string", "description": "comma-separated user ids to @mention"},
        "IsAtAll": {"type": "boolean", "default": False, "description": "@mention everyone in the group"},
    })  # fmt: skip
    service = "dingtalk"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        _url_param(params, "WebHook")
        if params.get("MsgType", "text") not in ("text", "markdown"):
            raise ParamError("MsgType", "must be text or markdown")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        keyword = f" {params['Keyword']}" if params.get("Keyword") else ""
        mobiles, users = _csv(params, "AtMobiles"), _csv(params, "AtUserIds")
        at = {"atMobiles": mobiles, "atUserIds": users, "isAtAll": bool(params.get("IsAtAll"))}
        if params.get("MsgType", "text") == "markdown":
            mentions = "".join(f" @{m}" for m in [*mobiles, *users])
            text = f"### {alert['title']}\n\n{_text(alert)}{keyword}{mentions}"
            body: dict[str, Any] = {"msgtype": "markdown", "markdown": {"title": alert["title"], "text": text}}
        else:
            body = {"msgtype": "text", "text": {"content": f"{alert['title']}\n{_text(alert)}{keyword}"}}
        body["at"] = at
        url = str(params["WebHook"])
        if params.get("Secret"):
            url = dingtalk_signed(url, str(params["Secret"]), int(time.time() * 1000))
        await self._post(url, body, timeout, accepted=_flag("errcode"))


def feishu_sign(secret: str, timestamp: int) -> str:
    """Feishu / Lark custom-bot signature: HMAC-SHA256 keyed by "<timestamp>\\n<secret>" over an empty message,
    base64."""
    digest = hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class FeishuSender(_JsonChannel):
    """Feishu / Lark custom bot (``WebHook``), signed when ``Secret`` is set; a text message."""

    plugin_type = "FEISHU"
    secret = ("WebHook", "Secret")
    params_schema = schema(["WebHook"], {
        "WebHook": secret_param("the custom bot's webhook URL"),
        "Secret": secret_param("signing secret: the message is signed when set"),
    })  # fmt: skip
    service = "feishu"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        _url_param(params, "WebHook")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        body: dict[str, Any] = {"msg_type": "text", "content": {"text": f"{alert['title']}\n{_text(alert)}"}}
        if params.get("Secret"):
            now = int(time.time())
            body = {"timestamp": str(now), "sign": feishu_sign(str(params["Secret"]), now), **body}

        def accepted(status: int, answer: Any) -> bool:
            # current answers carry "code", older ones "StatusCode"
            code = answer.get("code", answer.get("StatusCode")) if isinstance(answer, dict) else None
            return status == 200 and code == 0

        await self._post(params["WebHook"], body, timeout, accepted=accepted)


class WeComSender(_JsonChannel):
    """WeCom (WeChat Work). ``sendType`` ROBOT: a group robot's ``webHook``. ``sendType`` APP (DolphinScheduler's
    default): ``corpId`` + ``secret`` get a token, then an app message to ``users`` (``|``-separated or
    comma list, or @all) from ``agentId``; ``chatId`` instead sends to an app group chat. ``showType`` markdown
    (default) or text."""

    plugin_type = "WECOM"
    secret = ("secret", "webHook")
    params_schema = schema([], {
        "sendType": {"enum": ["APP", "ROBOT"], "default": "APP",
                     "description": "APP: an application message (corpId, secret, agentId); ROBOT: a group robot"},
        "corpId": {"type": "string", "description": "APP: the company (corp) id"},
        "secret": secret_param("APP: the application's secret"),
        "agentId": {"type": "string", "description": "APP: the application's agent id"},
        "users": {"type": "string", "description": "APP: user ids separated by | or commas (default @all)"},
        "chatId": {"type": "string", "description": "APP: an application group chat id, instead of users"},
        "apiUrl": {"type": "string", "description": "APP: API base URL (default https://qyapi.weixin.qq.com)"},
        "webHook": secret_param("ROBOT: the group robot's webhook URL"),
        "showType": {"enum": ["markdown", "text"], "default": "markdown", "description": "message format"},
    })  # fmt: skip
    service = "wecom"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        kind = params.get("sendType", "APP")
        if kind == "ROBOT":
            _url_param(params, "webHook")
        elif kind == "APP":
            require(params, "corpId", str)
            require(params, "secret", str)
            if not params.get("chatId"):
                require(params, "agentId", (str, int))
            _optional_url(params, "apiUrl")
        else:
            raise ParamError("sendType", "must be APP or ROBOT")
        if params.get("showType", "markdown") not in ("markdown", "text"):
            raise ParamError("showType", "must be markdown or text")

    def _message(self, alert: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        if params.get("showType", "markdown") == "text":
            return {"msgtype": "text", "text": {"content": f"{alert['title']}\n{_text(alert)}"}}
        content = "\n".join(f">{line}" for line in _text(alert).splitlines())
        return {"msgtype": "markdown", "markdown": {"content": f"**{alert['title']}**\n{content}"}}

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        message = self._message(alert, params)
        if params.get("sendType", "APP") == "ROBOT":
            await self._post(params["webHook"], message, timeout, accepted=_flag("errcode"))
            return
        api = str(params.get("apiUrl") or "https://qyapi.weixin.qq.com").rstrip("/")
        status, raw = await post_json(
            self.guard,
            f"{api}/cgi-bin/gettoken?corpid={quote_plus(str(params['corpId']))}"
            f"&corpsecret={quote_plus(str(params['secret']))}",
            None,
            timeout,
            method="GET",
            what=self.service,
        )
        answer = _json_answer(raw)
        if status != 200 or not isinstance(answer, dict) or answer.get("errcode") != 0:
            raise SendError(f"wecom refused the token request: HTTP {status}: {_answer(answer)}")
        token = quote_plus(str(answer["access_token"]))
        if params.get("chatId"):
            await self._post(
                f"{api}/cgi-bin/appchat/send?access_token={token}",
                {"chatid": params["chatId"], **message},
                timeout,
                accepted=_flag("errcode"),
            )
            return
        users = "|".join(_csv(params, "users") or ["@all"])
        body = {"touser": users, "agentid": int(params["agentId"]), **message}
        await self._post(f"{api}/cgi-bin/message/send?access_token={token}", body, timeout, accepted=_flag("errcode"))


class TelegramSender(_JsonChannel):
    """Telegram bot. Params as DolphinScheduler's: ``botToken``, ``chatId``, ``parseMode`` (Txt | Markdown |
    MarkdownV2 | Html), optional ``webHook`` (``{botToken}`` is replaced) or ``apiUrl``."""

    plugin_type = "TELEGRAM"
    secret = ("botToken", "webHook")
    params_schema = schema(["botToken", "chatId"], {
        "botToken": secret_param("the bot's token"),
        "chatId": {"type": "string", "description": "the chat (or channel) id to post to"},
        "parseMode": {"enum": ["Txt", "Markdown", "MarkdownV2", "Html"], "default": "Txt",
                      "description": "how Telegram parses the text"},
        "webHook": secret_param("full sendMessage URL, {botToken} replaced (optional, instead of apiUrl)"),
        "apiUrl": {"type": "string", "description": "Bot API base URL (default https://api.telegram.org)"},
    })  # fmt: skip
    service = "telegram"
    _MODES: ClassVar[dict[str, str | None]] = {"Txt": None, "Markdown": "Markdown", "MarkdownV2": "MarkdownV2",
                                                "Html": "HTML"}  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        require(params, "botToken", str)
        require(params, "chatId", (str, int))
        if params.get("parseMode", "Txt") not in cls._MODES:
            raise ParamError("parseMode", f"must be one of {', '.join(cls._MODES)}")
        _optional_url(params, "webHook")
        _optional_url(params, "apiUrl")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        token = str(params["botToken"])
        if params.get("webHook"):
            url = str(params["webHook"]).replace("{botToken}", token)
        else:
            api = str(params.get("apiUrl") or "https://api.telegram.org").rstrip("/")
            url = f"{api}/bot{token}/sendMessage"
        body: dict[str, Any] = {"chat_id": params["chatId"], "text": f"{alert['title']}\n{_text(alert)}"}
        mode = self._MODES[params.get("parseMode", "Txt")]
        if mode:
            body["parse_mode"] = mode
        await self._post(url, body, timeout, accepted=_flag("ok", True))


#: alert types that end an incident PagerDuty opened for the same workflow instance
_RESOLVING = frozenset({"PROCESS_INSTANCE_SUCCESS"})


class PagerDutySender(_JsonChannel):
    """PagerDuty Events API v2 (``IntegrationKey`` = the routing key). One incident per workflow instance
    (dedup key ``porpoise-instance-<id>``): a failure or timeout triggers it, the instance's later success
    resolves it."""

    plugin_type = "PAGERDUTY"
    secret = ("IntegrationKey",)
    params_schema = schema(["IntegrationKey"], {
        "IntegrationKey": secret_param("the Events API v2 integration (routing) key"),
        "apiUrl": {"type": "string", "description": "Events API base URL (default https://events.pagerduty.com)"},
    })  # fmt: skip
    service = "pagerduty"

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        require(params, "IntegrationKey", str)
        _optional_url(params, "apiUrl")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        instance = alert.get("workflow_instance_id")
        dedup = f"porpoise-instance-{instance}" if instance else f"porpoise-alert-{alert['id']}"
        kind = str(alert.get("alert_type_name", ""))
        body: dict[str, Any] = {
            "routing_key": params["IntegrationKey"],
            "event_action": "resolve" if kind in _RESOLVING else "trigger",
            "dedup_key": dedup,
        }
        if body["event_action"] == "trigger":
            body["payload"] = {
                "summary": str(alert["title"])[:1024],
                "source": "porpoise",
                "severity": "warning" if "TIMEOUT" in kind else "critical",
                "component": f"workflow instance {instance}" if instance else "porpoise",
                "class": kind,
                "custom_details": {"content": alert.get("content"), "alert_id": alert["id"]},
            }
            if alert.get("link"):
                body["links"] = [{"href": alert["link"], "text": "Open in Porpoise"}]
        api = str(params.get("apiUrl") or "https://events.pagerduty.com").rstrip("/")
        await self._post(f"{api}/v2/enqueue", body, timeout, accepted=lambda s, a: s in (200, 202))
