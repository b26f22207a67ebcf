"""The ``porpoise`` command: one module per command group.

- ``main``: the parser, dispatch, and the local commands (``standalone``, ``cluster start|stop|status``, ``db``);
- ``remote``: workflows and instances through the API (apply, start, list, status, watch, logs, control,
  ``cluster``, ``worker drain|undrain``);
- ``schedule``: schedules, backfill, force-success; ``task_groups``: ``task-group``; ``datasources``:
  ``datasource``; ``users``: ``user`` and
  ``token``; ``migrate``: ``import`` / ``export`` of DolphinScheduler files;
- ``client``: the REST API client the commands (and the SDK) use, and how it finds the API and its token.
"""

from engine.cli.main import main

__all__ = ["main"]
