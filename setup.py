"""Build hook: the wheel carries the repository's env.yaml, manifests/, notebooks/ and profiles/ as package data.

They stay at the top of the repository (where learners look for them); a regular build copies them into
``raytrain_helpers/_data/``, where ``raytrain_helpers.core.paths`` finds them when the package is installed
without the repository. An editable install reads them from the repository itself, so nothing is copied then.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: what ships: a top-level path of the repository -> the file pattern taken from it
SHIPPED = {"env.yaml": None, "manifests": "*.j2", "notebooks": "*.ipynb", "profiles": "*.yaml"}


class BuildPyWithData(build_py):
    """``build_py`` that also copies the tutorial's data into ``raytrain_helpers/_data``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = Path(self.build_lib) / "raytrain_helpers" / "_data"
        for name, pattern in SHIPPED.items():
            src = ROOT / name
            files = [src] if pattern is None else sorted(src.glob(pattern))
            if not files or not all(f.is_file() for f in files):
                raise FileNotFoundError(f"{src}: nothing to ship (expected {pattern or 'a file'})")
            for f in files:
                target = dest / f.relative_to(ROOT)
                self.mkpath(str(target.parent))
                self.copy_file(str(f), str(target))


setup(cmdclass={"build_py": BuildPyWithData})
