"""Workflow definitions: the model users write, its validation, and the DAG."""
