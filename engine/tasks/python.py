"""PYTHON: a Python script run with its ``interpreter`` parameter, else the worker's ``worker.python_interpreter``
(default ``python3`` from the task's PATH: never the worker's own virtualenv unless configured so). A
parameter's value reaches the script as a Python literal, never as code (engine.tasks.placing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.tasks import placing
from engine.tasks.base import Launch, ParamError, TaskContext, TaskPlugin, describe_params, optional, require_str


class PythonTask(TaskPlugin):
    task_type = "PYTHON"
    params_schema = describe_params(
        {
            "rawScript": {"type": "string", "contentMediaType": "text/x-python", "description": "Python script"},
            "interpreter": {"type": "string", "description": "path of the interpreter; default: the worker's own"},
        },
        required=("rawScript",),
        examples=({"rawScript": "print('hello')"},),
    )

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        require_str(params, "rawScript")
        interpreter = optional(params, "interpreter", str, "")
        if interpreter and "\n" in interpreter:
            raise ParamError("interpreter", "must be a single path")

    def launch(self, ctx: TaskContext) -> Launch:
        script = placing.python(ctx.task_params["rawScript"], ctx.values, ctx.when)
        interpreter = ctx.task_params.get("interpreter") or ctx.python_interpreter
        files = {"script.py": script + "\n"}
        if ctx.environment_config.strip():
            files["run.sh"] = f'{ctx.environment_config.strip()}\nexec "{interpreter}" script.py\n'
            return Launch(argv=["bash", "run.sh"], files=files)
        return Launch(argv=[interpreter, "script.py"], files=files)
