"""Users' credentials below the API: password hashing and API tokens as rows, shared by the API server and the
launchers that make the first admin (engine/infra/access.py), which must not import the API."""
