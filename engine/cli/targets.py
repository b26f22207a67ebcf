"""The positional ``target`` of the CLI's action commands (``porpoise task-group show 3``): given, and a number
where an id is meant, else one line naming the command, the action and what was expected."""

from __future__ import annotations

import argparse

from engine.client import ApiClientError


def need(args: argparse.Namespace, command: str, what: str) -> str:
    if not args.target:
        raise ApiClientError(f"{command} {args.action}: give the {what}")
    return str(args.target)


def number(args: argparse.Namespace, command: str, what: str) -> int:
    raw = need(args, command, what)
    try:
        return int(raw)
    except ValueError:
        raise ApiClientError(f"{command} {args.action}: the {what} must be a number, got {raw!r}") from None
