"""Task plugins. Worker plugins (SHELL, PYTHON, SQL, SPARK) turn a task definition into a process
launch; they are discovered through the ``porpoise.tasks`` entry-point group (see registry.py)."""
