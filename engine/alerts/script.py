"""SCRIPT alert sender: an executable of ``api.alert_script_dir`` run on the API host, the alert as JSON on its
standard input (DolphinScheduler's script plugin passes title and content as arguments instead; JSON on stdin
needs no quoting rules and carries every field).

Only a file name is accepted, never a path, so a sender cannot name any other program of the host; SCRIPT
senders are refused while ``api.alert_script_dir`` is empty. The script gets ``userParams`` as its one
argument, a minimal environment (no secret of the API server), its own process group, and the alert timeout;
exit 0 is success, anything else fails the delivery with the end of its standard error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.alerts.http import SendError
from engine.alerts.senders import AlertSender, require, schema
from engine.tasks.base import ParamError

_STDERR_CHARS = 500


class ScriptSender(AlertSender):
    """Params: ``path`` (a file name in ``api.alert_script_dir``), ``userParams`` (optional, one argument)."""

    plugin_type = "SCRIPT"
    params_schema = schema(["path"], {
        "path": {"type": "string", "description": "file name of an executable in the API's alert_script_dir"},
        "userParams": {"type": "string", "description": "one argument given to the script (optional)"},
    })  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        name = require(params, "path", str)
        if "/" in name or name in (".", "..") or "\0" in name:
            raise ParamError("path", "must be a file name in api.alert_script_dir, not a path")
        if not isinstance(params.get("userParams", ""), str):
            raise ParamError("userParams", "must be a string")

    async def send(self, alert: Mapping[str, Any], params: Mapping[str, Any], timeout: float) -> None:
        if not self.script_dir:
            raise SendError("SCRIPT senders are off on this API server (api.alert_script_dir is empty)")
        script = Path(self.script_dir) / str(params["path"])
        if not script.is_file() or not os.access(script, os.X_OK):
            raise SendError(f"script {params['path']!r} is not an executable file in {self.script_dir}")
        args = [str(script)] + ([str(params["userParams"])] if params.get("userParams") else [])
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.script_dir,
            start_new_session=True,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(json.dumps(dict(alert), default=str).encode()), timeout)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise SendError(f"script {params['path']!r} did not finish within {timeout:g} s") from None
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-_STDERR_CHARS:]
            raise SendError(f"script {params['path']!r} exited with {proc.returncode}: {tail}")
