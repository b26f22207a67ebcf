"""Master node: claims commands of its slot, drives workflow instances, dispatches tasks."""
