"""The package list, found rather than written out: a new subpackage cannot be left out of the wheel.

The repository root is the package ``shapeproof`` (``package-dir`` in pyproject.toml, where everything
else about the project is), so each folder with an ``__init__.py`` below a layer is a subpackage of it,
and this script, at the root, is the one module of the root that is not the package's.
"""
from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

LAYERS = ("solver", "shapes", "tracer", "export")


class _BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if (package, m[1]) != ("shapeproof", "setup")]


setup(cmdclass={"build_py": _BuildPy},
      packages=["shapeproof", *(f"shapeproof.{p}" for p in find_packages(
          include=[pattern for layer in LAYERS for pattern in (layer, f"{layer}.*")]))])
