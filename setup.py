"""The build step pyproject.toml cannot declare: the wheel's ``engine/_data/`` is built from the repository
root's ``schema.sql`` and ``configs/`` (engine/datafiles.py reads them from either place)."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = ["schema.sql", "configs"]


class BuildWithData(build_py):
    """build_py, then the root's data files copied into the built ``engine`` package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads them in the checkout
        target = Path(self.build_lib) / "engine" / "_data"
        target.mkdir(parents=True, exist_ok=True)
        for name in DATA:
            src, dest = ROOT / name, target / name
            if src.is_dir():
                shutil.copytree(src, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, dest)


setup(cmdclass={"build_py": BuildWithData})
