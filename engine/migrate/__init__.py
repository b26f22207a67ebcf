"""Translations between Porpoise workflow documents and other schedulers' export formats (pure code)."""
