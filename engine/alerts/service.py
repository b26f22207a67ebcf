"""Delivers alert rows: claims pending ones, sends them through their group's senders, retries.

Any number of processes may run it (the API server does): a claim is ``FOR UPDATE SKIP LOCKED`` plus
a lease (``next_attempt_time``), so one alert is in one sender's hands at a time, and one whose
sender died is taken up again when the lease ends. Each attempt sends only to the senders that have
not delivered it yet (recorded in ``log``), so a retry never mails twice. After ``max_attempts`` the
alert ends EXECUTION_FAILURE (nothing delivered) or EXECUTION_PARTIAL_SUCCESS. Secrets from the
senders' params never reach a log line or the ``log`` column.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.alerts.netguard import AddressPolicy
from engine.alerts.senders import SECRET_KEYS, SendError, plugins, redact
from engine.secretbox import Keyring, SecretError, open_params
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

WAIT, SUCCESS, FAILURE, PARTIAL = 0, 1, 2, 3
ALERT_TYPES = {
    0: "PROCESS_INSTANCE_FAILURE", 1: "PROCESS_INSTANCE_SUCCESS", 2: "PROCESS_INSTANCE_BLOCKED",
    3: "PROCESS_INSTANCE_TIMEOUT", 4: "FAULT_TOLERANCE_WARNING", 5: "TASK_FAILURE", 6: "TASK_SUCCESS",
    7: "TASK_TIMEOUT", 9: "TASK_RETRY",
}  # fmt: skip

_CLAIM = (
    "UPDATE alert SET attempts = attempts + 1, update_time = now(),"
    " next_attempt_time = now() + make_interval(secs => $2) WHERE id IN (SELECT id FROM alert"
    " WHERE alert_status = 0 AND next_attempt_time <= now() ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)"
    " RETURNING *"
)


class AlertService(BackgroundService):
    task_name = "alert-sender"

    def __init__(
        self,
        pool: asyncpg.Pool,
        interval: float,
        max_attempts: int,
        retry_seconds: float,
        timeout: float,
        guard: AddressPolicy | None = None,
        keyring: Keyring | None = None,
        script_dir: str = "",
        public_url: str = "",
    ) -> None:
        self.pool = pool
        #: SCRIPT senders' directory (api.alert_script_dir); empty: they fail with the reason
        self.script_dir = script_dir
        #: the web UI's address (api.public_url): alerts link to their instance there
        self.public_url = public_url.rstrip("/")
        #: where webhook senders may connect (api.alert_webhook_allow / deny)
        self.guard = guard or AddressPolicy()
        #: opens the senders' sealed secrets just before a delivery
        self.keyring = keyring or Keyring([])
        self.interval = interval
        self.max_attempts = max_attempts
        self.retry_seconds = retry_seconds
        self.timeout = timeout

    async def _run(self) -> None:
        while True:
            try:
                while await self.deliver_once() > 0:
                    pass
            except DB_FAILURES as exc:
                log.warning("alert delivery pass failed", error=str(exc))
            await asyncio.sleep(self.interval)

    async def deliver_once(self, batch: int = 20) -> int:
        """Claim and handle one batch of due alerts; returns how many were claimed."""
        lease = self.timeout * 4 + self.retry_seconds
        rows = await self.pool.fetch(_CLAIM, batch, lease)
        await asyncio.gather(*(self._deliver(r) for r in rows))
        return len(rows)

    async def _deliver(self, row: asyncpg.Record) -> None:
        alert_id, attempts = int(row["id"]), int(row["attempts"])
        state = _state(row["log"])
        senders = []
        if row["alert_group_id"] is not None:
            senders = await self.pool.fetch(
                "SELECT id, plugin_type, name, params FROM alert_sender WHERE alert_group_id = $1 ORDER BY id",
                row["alert_group_id"],
            )
        if not senders:
            await self._finish(alert_id, SUCCESS, {**state, "note": "no alert group or no sender: nothing to send"})
            return
        payload = {
            "id": alert_id, "title": row["title"], "content": row["content"], "alert_type": row["alert_type"],
            "alert_type_name": ALERT_TYPES.get(row["alert_type"], str(row["alert_type"])),
            "workflow_instance_id": row["workflow_instance_id"], "project_code": row["project_code"],
            "workflow_definition_code": row["workflow_definition_code"], "create_time": row["create_time"],
            "link": instance_link(self.public_url, row["workflow_instance_id"]),
            "task_instance_id": row["task_instance_id"],
            "log_link": task_log_link(self.public_url, row["task_instance_id"]),
        }  # fmt: skip
        delivered: list[int] = list(state.get("delivered", []))
        errors: dict[str, str] = {}
        for sender in senders:
            if sender["id"] in delivered:
                continue
            params = dict(sender["params"])
            cls = plugins().get(sender["plugin_type"])
            try:
                if cls is None:
                    raise SendError(f"unknown sender type {sender['plugin_type']}")
                try:
                    params = open_params(self.keyring, params, SECRET_KEYS, "alert_sender")
                except SecretError as exc:
                    raise SendError(str(exc)) from None
                await cls(self.guard, self.script_dir).send(payload, params, self.timeout)
                delivered.append(sender["id"])
            except SendError as exc:
                errors[sender["name"]] = redact(str(exc), params)
                log.warning("alert not delivered", alert_id=alert_id, sender=sender["name"],
                            attempt=attempts, error=errors[sender["name"]])  # fmt: skip
        state = {"delivered": delivered, "errors": errors}
        if not errors:
            await self._finish(alert_id, SUCCESS, state)
        elif attempts >= self.max_attempts:
            await self._finish(alert_id, PARTIAL if delivered else FAILURE, state)
        else:
            delay = self.retry_seconds * 2 ** (attempts - 1)
            await self.pool.execute(
                "UPDATE alert SET log = $2, next_attempt_time = now() + make_interval(secs => $3), update_time = now()"
                " WHERE id = $1",
                alert_id,
                json.dumps(state),
                float(delay),
            )

    async def _finish(self, alert_id: int, status: int, state: dict[str, Any]) -> None:
        await self.pool.execute(
            "UPDATE alert SET alert_status = $2, log = $3, update_time = now() WHERE id = $1",
            alert_id,
            status,
            json.dumps(state),
        )


def instance_link(public_url: str, instance_id: int | None) -> str | None:
    """Where the web UI shows an instance, when the API knows its public address."""
    return f"{public_url.rstrip('/')}/instances/{instance_id}" if public_url and instance_id else None


def task_log_link(public_url: str, task_instance_id: int | None) -> str | None:
    """Where the web UI shows a task attempt's log (a task alert's link)."""
    return f"{public_url.rstrip('/')}/tasks/{task_instance_id}/log" if public_url and task_instance_id else None


def _state(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
