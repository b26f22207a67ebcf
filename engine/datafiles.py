"""Where a node finds its data files: ``schema.sql`` and ``configs/`` sit at the repository's root, as the
design card lays the project out. A checkout reads them there; the wheel carries them as ``engine/_data/``
(setup.py's build step copies them in), so there is one copy in the tree and an installed node needs no
checkout."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

#: the repository's root, when this module runs from a checkout (an editable install included)
CHECKOUT_ROOT = Path(__file__).resolve().parent.parent


def ui_dist(configured: str) -> Path:
    """The built web UI: ``api.ui_dir`` when set, else the checkout's ``ui/dist`` (``make install`` builds it)."""
    return Path(configured).resolve() if configured else CHECKOUT_ROOT / "ui" / "dist"


def data_path(name: str) -> Path:
    """``name`` (``schema.sql``, ``configs``) as the wheel ships it, else in the checkout."""
    packaged = Path(str(importlib.resources.files("engine").joinpath("_data", name)))
    return packaged if packaged.exists() else CHECKOUT_ROOT / name
