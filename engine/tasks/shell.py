"""SHELL: a bash script; the exit code decides success. A parameter's value reaches the script in an
environment variable, never as script text (engine.tasks.placing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.tasks import placing
from engine.tasks.base import (
    Launch,
    TaskContext,
    TaskPlugin,
    describe_params,
    require_str,
    script_with_environment,
)


class ShellTask(TaskPlugin):
    task_type = "SHELL"
    params_schema = describe_params(
        {"rawScript": {"type": "string", "contentMediaType": "text/x-shellscript", "description": "bash script"}},
        required=("rawScript",),
        examples=({"rawScript": "echo hello"},),
    )

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        require_str(params, "rawScript")

    def launch(self, ctx: TaskContext) -> Launch:
        placed = placing.shell(ctx.task_params["rawScript"], ctx.values, ctx.when)
        return Launch(
            argv=["bash", "script.sh"],
            files={"script.sh": script_with_environment(ctx, placed.text) + "\n"},
            env=placed.env,
        )
