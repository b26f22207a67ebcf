"""Worker node: runs task plugins in subprocesses and reports to the owning master."""
