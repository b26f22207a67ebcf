"""Resource-center files in task parameters: :class:`Resource`.

::

    from porpoise import Resource, Shell, Spark

    Shell("clean", "bash etl/clean.sh", resources=[Resource("etl/clean.sh"), "etl/common.sh"])
    Spark("agg", main_file=Resource("jobs/agg.py", version=3))

A workflow version pins each file to its newest version when it is saved, unless the resource says
``latest=True`` (then each run gets whatever is newest). The worker puts the files in the task's working
directory at their paths. Upload them with ``porpoise resource upload`` or :meth:`porpoise.Client.upload_resource`.
"""

from __future__ import annotations

from typing import Any


class Resource(dict[str, Any]):
    """DolphinScheduler's ``{"resourceName": path}`` (a dict, so it goes into any task parameter as is), with
    ``version`` pinned explicitly or ``latest=True`` to follow the newest version."""

    def __init__(self, path: str, *, version: int | None = None, latest: bool = False) -> None:
        if not isinstance(path, str) or not path.strip() or path.startswith("/"):
            raise ValueError(
                f"Resource({path!r}): give the file's path in the project's resource center, e.g. etl/clean.py"
            )
        if version is not None and latest:
            raise ValueError(f"Resource({path!r}): give version or latest, not both")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise ValueError(f"Resource({path!r}): version must be a number >= 1")
        super().__init__(resourceName=path)
        if version is not None:
            self["version"] = version
        elif latest:
            self["version"] = "latest"

    @property
    def path(self) -> str:
        return str(self["resourceName"])
