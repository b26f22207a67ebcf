"""aiohttp JSON RPC between nodes (typed, versioned, signed messages)."""
