"""Structured logging (structlog).

Servers log JSON lines; ``make run`` logs readable console lines. Context such as the node, the
workflow instance id and the task instance id is bound through contextvars, so every line logged
inside an actor or a task handler carries them::

    with bound(workflow_instance_id=12, task_instance_id=40):
        log.info("task dispatched", worker="127.0.0.1:1234")
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Mapping
from typing import Any

import structlog


class _Stderr:
    """Writes to whatever ``sys.stderr`` is when a line is written, not when logging was configured: a process
    that swaps its stderr (a test harness capturing output, then closing the capture) keeps logging to the
    live one instead of raising on a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


_STDERR = _Stderr()

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
#: bumped by every configure(): a logger made under an earlier configuration is made again
_generation = [0]


def configure(fmt: str = "json", level: str = "info", **static: Any) -> None:
    """Configure structlog (and stdlib logging of libraries) for this process.

    ``static`` key/values (e.g. ``node="master@127.0.0.1:5678"``) are bound for the whole process.
    """
    numeric = _LEVELS[level]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if fmt == "console":
        # tracebacks without local variables here too (rich's formatter, the default when rich is installed,
        # shows them: a page of commands with their start parameters, a DSN)
        renderer = structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    else:
        # no local variables in tracebacks: they may hold secrets (DSNs, tokens, task environments)
        shared.append(
            structlog.processors.ExceptionRenderer(structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
        )
        renderer = structlog.processors.JSONRenderer()
    _generation[0] += 1
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Library loggers (asyncio, aiohttp) go through the same renderer.
    handler = logging.StreamHandler(_STDERR)  # type: ignore[arg-type]
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(processors=[*_strip_meta(), renderer], foreign_pre_chain=shared)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.INFO))
    structlog.contextvars.clear_contextvars()
    if static:
        structlog.contextvars.bind_contextvars(**static)


def _strip_meta() -> list[Any]:
    return [structlog.stdlib.ProcessorFormatter.remove_processors_meta]


class _Logger:
    """A module's logger: the bound logger of the current configuration, made once per configure() (a
    structlog lazy proxy not cached on first use makes one on every call: ~25 us, even for a line its
    level filters out)."""

    __slots__ = ("_bound", "_generation", "_initial")

    def __init__(self, initial: dict[str, Any]) -> None:
        self._initial = initial
        self._generation = -1
        self._bound: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._generation != _generation[0] or self._bound is None:
            self._bound = structlog.get_logger(**self._initial).bind()
            self._generation = _generation[0]
        return getattr(self._bound, name)


def get(name: str | None = None, **initial: Any) -> Any:
    """A bound logger; ``name`` becomes the ``logger`` key."""
    if name:
        initial["logger_name"] = name
    return _Logger(initial)


class bound:
    """Bind ids (workflow_instance_id, task_instance_id, ...) for the code inside the block, restoring what
    they were on the way out. A class rather than a generator (and the ids set straight with their tokens,
    not through structlog's ``bound_contextvars``, which copies the whole context): a worker enters one per
    task and a master one per actor turn."""

    __slots__ = ("_ids", "_tokens")

    def __init__(self, **ids: Any) -> None:
        self._ids = ids
        self._tokens: Mapping[str, contextvars.Token[Any]] = {}

    def __enter__(self) -> None:
        self._tokens = structlog.contextvars.bind_contextvars(**self._ids)

    def __exit__(self, *exc: object) -> None:
        structlog.contextvars.reset_contextvars(**self._tokens)
