"""The same workloads on another scheduler and on Porpoise, measured in one run (``python -m bench peers <name>``)."""
