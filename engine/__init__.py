"""Porpoise engine: masters, workers, API, storage and the launchers that run them."""

__version__ = "0.1.0"
