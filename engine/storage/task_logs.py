"""Archived task logs in the blob store: their keys and the states of ``task_log_archive`` rows (written by
the API's archiver, engine/api/logarchive.py; read by the log routes; removed by retention)."""

from __future__ import annotations

import enum

PREFIX = "task-logs/"


class ArchiveState(enum.IntEnum):
    """``task_log_archive.state``."""

    PENDING = 0
    ARCHIVED = 1
    #: the worker no longer had the log (removed before it could be archived)
    MISSING = 2
    #: the worker did not answer for ``api.log_archive_max_tries`` tries
    FAILED = 3


def archive_key(workflow_instance_id: int, task_instance_id: int, attempt: int) -> str:
    return f"{instance_prefix(workflow_instance_id)}{task_instance_id}-{attempt}.log.gz"


def instance_prefix(workflow_instance_id: int) -> str:
    """Every archived log of one workflow instance's attempts is under this key prefix."""
    return f"{PREFIX}{workflow_instance_id}/"
