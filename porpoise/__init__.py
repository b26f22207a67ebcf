"""Porpoise's Python SDK: workflows as code, and their runs read back over the REST API.

::

    from porpoise import Workflow, Shell, Spark

    with Workflow("taxi_daily", project="demo", schedule="0 0 2 * * ?", params={"biz_date": "$[yyyyMMdd]"}) as wf:
        gen = Shell("generate", "python generate.py --date ${biz_date}", retries=2)
        agg = Spark("aggregate", main_file="clean_aggregate.py", executor_memory="1g")
        gen >> agg
    wf.apply()                       # create, or save the next version, through the REST API
    run = wf.start(wait=True)        # an Instance: state, tasks, logs, stop(), rerun()

docs/SDK.md has the whole surface.
"""

from porpoise.client import ApiError, Client, Instance, TaskRun
from porpoise.loader import load_workflows
from porpoise.resources import Resource
from porpoise.tasks import Conditions, Dep, Dependent, Http, Python, Shell, Spark, Sql, SubWorkflow, Switch
from porpoise.workflow import Task, Workflow, WorkflowError

__all__ = [
    "ApiError",
    "Client",
    "Conditions",
    "Dep",
    "Dependent",
    "Http",
    "Instance",
    "Python",
    "Resource",
    "Shell",
    "Spark",
    "Sql",
    "SubWorkflow",
    "Switch",
    "Task",
    "TaskRun",
    "Workflow",
    "WorkflowError",
    "load_workflows",
]
