"""Password hashing: argon2id (argon2-cffi's defaults, RFC 9106's second recommended profile), run off the
event loop (a hash takes tens of milliseconds and 64 MiB by design)."""

from __future__ import annotations

import asyncio

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

MIN_LENGTH = 8
_HASHER = PasswordHasher()
#: checked against when the user does not exist, so that answering takes as long as for a real user
_DUMMY = _HASHER.hash("porpoise-no-such-user")


def password_problem(password: str) -> str | None:
    if len(password) < MIN_LENGTH:
        return f"must be at least {MIN_LENGTH} characters"
    if password.strip() != password or not password.strip():
        return "must not start or end with spaces"
    return None


async def hash_password(password: str) -> str:
    return await asyncio.to_thread(_HASHER.hash, password)


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _HASHER.verify(stored or _DUMMY, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches the argon2id hash ``stored`` (None: no password set, always False)."""
    return await asyncio.to_thread(_verify, stored, password)
