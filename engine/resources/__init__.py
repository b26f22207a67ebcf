"""The resource center: versioned files of a project that tasks use (docs/RESOURCES.md)."""
