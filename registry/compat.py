"""The one compatibility shim Porpoise applies to etcd3-py.

etcd3-py 0.1.6's stream responses (lease keep-alive, watch) check
``isinstance(resp, aiohttp.client._RequestContextManager)``; on current aiohttp that name is a
parameterised generic, and isinstance() on it raises TypeError, so every stream call fails.
Pointing the module-level name at the plain base class restores the check. tests/test_registry_compat.py
fails if the shim stops working *or* stops being needed (then delete this module).
"""

from __future__ import annotations

import aiohttp.client
import etcd3.aio_client


def install() -> None:
    """Apply the shim (idempotent)."""
    etcd3.aio_client._RequestContextManager = aiohttp.client._BaseRequestContextManager


def installed() -> bool:
    return etcd3.aio_client._RequestContextManager is aiohttp.client._BaseRequestContextManager
