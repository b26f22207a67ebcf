"""The base layer every other package may import and which imports none of them: structured logging
(:mod:`core.logs`), the asyncio helpers of services that own background tasks (:mod:`core.aio`) and the
project's error tree (:mod:`core.errors`). The layers are declared in pyproject.toml ([tool.importlinter])
and checked by ``lint-imports`` (``make lint``, tests/test_layers.py)."""
