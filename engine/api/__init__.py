"""The REST API server (``python -m engine.api``)."""
