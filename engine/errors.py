"""Moved to :mod:`core.errors`. This name stays an alias of it only so that code written before the move still
imports; the import-linter contract "Nothing imports the moved modules' old names" (pyproject.toml) names
every such import. Delete this file once none is left."""

import sys

from core import errors

sys.modules[__name__] = errors
